//! The timelines that gemm_wg's `STAMPS=1` probe builds write into their `ws` buffer
//! (kernels/gemm_wg.tile, `wg_stamp`), read back after a `bench-kernels` run: where each tile's
//! time goes between its start, its first slice's arrival, its last MMAs and its stores, tile
//! by tile of the persistent blocks.

use std::fmt::Write;

/// The probe builds' parameter.
pub const STAMPS: &str = "STAMPS";
/// Tiles a block stamps (the kernel's `WG_STAMP_TILES`); later ones are not recorded.
const TILES: usize = 16;
/// Words of one tile's stamps (the kernel's `WG_STAMP_WORDS`).
const WORDS: usize = 16;

/// Words of `ws` a STAMPS build of a persistent grid of `blocks` blocks writes.
pub fn workspace_words(blocks: usize) -> usize {
    blocks * TILES * WORDS
}

/// One tile's stamps: %clock64 cycles and %globaltimer nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tile {
    start: u64,
    first_slice: u64,
    last_mma: u64,
    stored: u64,
    producer_first: u64,
    start_ns: u64,
    stored_ns: u64,
}

impl Tile {
    fn read(entry: &[u32]) -> Option<Tile> {
        let pair = |p: usize| u64::from(entry[2 * p]) | u64::from(entry[2 * p + 1]) << 32;
        (entry[15] == 1).then(|| Tile {
            start: pair(0),
            first_slice: pair(1),
            last_mma: pair(2),
            stored: pair(3),
            producer_first: pair(4),
            start_ns: pair(5),
            stored_ns: pair(6),
        })
    }
}

/// The blocks' tiles in order, from the words of `ws`.
fn blocks(words: &[u32]) -> Vec<Vec<Tile>> {
    (words.chunks_exact(TILES * WORDS))
        .map(|block| (block.chunks_exact(WORDS)).map_while(Tile::read).collect())
        .filter(|tiles: &Vec<Tile>| !tiles.is_empty())
        .collect()
}

/// Mean and largest value.
fn mean_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut sum, mut max, mut n) = (0.0, f64::MIN, 0usize);
    for v in values {
        sum += v;
        max = max.max(v);
        n += 1;
    }
    (sum / n.max(1) as f64, max)
}

/// A table of the stamps in `words` (a STAMPS build's `ws` after a launch): per tile index of
/// the blocks, how many blocks ran one, when they started (us after the first block's first
/// tile, by %globaltimer), and the mean (largest) time of each phase in us: the wait for the
/// tile's first slice, its MMAs, its epilogue, and the step to the next tile; and how long
/// before the consumers' start the producer started the tile's first copies. Cycles become
/// microseconds at the clock the stamps themselves give (cycles over nanoseconds of the same
/// intervals). None when no block wrote a stamp.
pub fn summary(words: &[u32]) -> Option<String> {
    let blocks = blocks(words);
    let all = || blocks.iter().flatten();
    let t0 = all().map(|t| t.start_ns).min()?;
    let end = all().map(|t| t.stored_ns).max()?;
    let cycles: u64 = all().map(|t| t.stored.wrapping_sub(t.start)).sum();
    let ns: u64 = all().map(|t| t.stored_ns.saturating_sub(t.start_ns)).sum();
    // Cycles per microsecond; a timer that did not move (resolution) leaves the count raw.
    let per_us = if ns > 0 {
        cycles as f64 / ns as f64 * 1e3
    } else {
        1e3
    };
    let us = |from: u64, to: u64| to.wrapping_sub(from) as i64 as f64 / per_us;
    let tiles = blocks.iter().map(Vec::len).max()?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "stamps: {} blocks, {} tiles, {:.1} us from the first start to the last store, clock {:.0} MHz",
        blocks.len(),
        all().count(),
        (end - t0) as f64 / 1e3,
        per_us,
    );
    let _ = writeln!(
        out,
        "tile blocks  start us      first slice   MMAs          epilogue      to next      producer lead"
    );
    for i in 0..tiles {
        let at: Vec<(Tile, Option<Tile>)> = (blocks.iter())
            .filter(|b| b.len() > i)
            .map(|b| (b[i], b.get(i + 1).copied()))
            .collect();
        let phase = |f: &dyn Fn(&Tile) -> f64| mean_max(at.iter().map(|(t, _)| f(t)));
        let starts = at.iter().map(|(t, _)| (t.start_ns - t0) as f64 / 1e3);
        let first_start = starts.clone().fold(f64::MAX, f64::min);
        let last_start = starts.fold(f64::MIN, f64::max);
        let wait = phase(&|t| us(t.start, t.first_slice));
        let mmas = phase(&|t| us(t.first_slice, t.last_mma));
        let epilogue = phase(&|t| us(t.last_mma, t.stored));
        let next = mean_max(
            at.iter()
                .filter_map(|(t, n)| n.map(|n| us(t.stored, n.start))),
        );
        let lead = phase(&|t| us(t.producer_first, t.start));
        let pair = |(mean, max): (f64, f64)| format!("{mean:6.2} ({max:5.2})");
        let next = match at.iter().any(|(_, n)| n.is_some()) {
            true => pair(next),
            false => "-".into(),
        };
        let _ = writeln!(
            out,
            "{i:4} {:6}  {first_start:5.1}-{last_start:5.1}  {}  {}  {}  {next:13}  {}",
            at.len(),
            pair(wait),
            pair(mmas),
            pair(epilogue),
            pair(lead),
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of one block's tiles, as the kernel writes them.
    fn block_words(tiles: &[[u64; 7]]) -> Vec<u32> {
        let mut words = vec![0u32; TILES * WORDS];
        for (i, stamps) in tiles.iter().enumerate() {
            let entry = &mut words[i * WORDS..(i + 1) * WORDS];
            for (p, &v) in stamps.iter().enumerate() {
                entry[2 * p] = v as u32;
                entry[2 * p + 1] = (v >> 32) as u32;
            }
            entry[14] = i as u32;
            entry[15] = 1;
        }
        words
    }

    #[test]
    fn phases_come_out_at_the_stamps_own_clock() {
        // A 2 GHz clock (2000 cycles a microsecond) past 2^32 cycles, two blocks: the first
        // runs two tiles, the second one, starting a microsecond later.
        let c = 1u64 << 33;
        let ns = 5_000_000_000u64;
        let mut words = block_words(&[
            // start, first slice, last MMA, stored, producer, start ns, stored ns
            [
                c,
                c + 2000,
                c + 20_000,
                c + 24_000,
                c - 1000,
                ns,
                ns + 12_000,
            ],
            [
                c + 24_200,
                c + 25_200,
                c + 45_200,
                c + 48_200,
                c + 22_000,
                ns + 12_100,
                ns + 24_100,
            ],
        ]);
        words.extend(block_words(&[[
            c + 7,
            c + 4007,
            c + 22_007,
            c + 26_007,
            c + 7,
            ns + 1000,
            ns + 14_000,
        ]]));
        // An unused block's words stay zero.
        words.extend(vec![0; TILES * WORDS]);
        let text = summary(&words).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("stamps: 2 blocks, 3 tiles, 24.1 us")
                && lines[0].contains("2000 MHz"),
            "{text}"
        );
        let cells = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
        // Tile 0: two blocks starting 0 and 1 us in; first slices after 1 and 2 us (mean 1.5),
        // MMAs 9 us, epilogues 2 us; the first block's next tile 0.1 us after its stores; the
        // producers 0.5 and 0 us ahead.
        assert_eq!(
            cells(lines[2]),
            [
                "0", "2", "0.0-", "1.0", "1.50", "(", "2.00)", "9.00", "(", "9.00)", "2.00", "(",
                "2.00)", "0.10", "(", "0.10)", "0.25", "(", "0.50)"
            ],
            "{text}"
        );
        assert_eq!(
            cells(lines[3]),
            [
                "1", "1", "12.1-", "12.1", "0.50", "(", "0.50)", "10.00", "(10.00)", "1.50", "(",
                "1.50)", "-", "1.10", "(", "1.10)"
            ],
            "{text}"
        );
        assert_eq!(summary(&vec![0; TILES * WORDS]), None);
    }
}
