//! Token sampling: greedy, temperature, top-k, top-p, with a small seeded RNG.

/// Sampling settings. The defaults are greedy decoding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerConfig {
    /// `<= 0` means greedy (argmax); otherwise logits are divided by it before sampling.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; 0 keeps all.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p`; 1 keeps all.
    pub top_p: f32,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

/// Picks the next token from a row of logits.
#[derive(Clone, Debug)]
pub struct Sampler {
    config: SamplerConfig,
    rng: Rng,
}

impl Sampler {
    pub fn new(config: SamplerConfig) -> Self {
        Self {
            config,
            rng: Rng::new(config.seed),
        }
    }

    /// Whether this sampler always takes the most likely token.
    pub fn is_greedy(&self) -> bool {
        self.config.temperature <= 0.0
    }

    /// How many candidates [`Sampler::sample_candidates`] needs: `Some(top_k)` when this sampler
    /// draws among the `top_k` most likely tokens, `None` when greedy or when it needs them all.
    pub fn top_k(&self) -> Option<usize> {
        (!self.is_greedy() && self.config.top_k > 0).then_some(self.config.top_k)
    }

    /// The next token id. Filters apply in llama.cpp's order: top-k, then top-p on the
    /// untempered distribution, then temperature.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.is_greedy() {
            return argmax(logits);
        }
        let k = match self.config.top_k {
            0 => logits.len(),
            k => k,
        };
        self.sample_candidates(top_k(logits, k))
    }

    /// The next token id from candidates sorted as [`top_k`] sorts them, at least the `top_k`
    /// most likely tokens (all of them when `top_k` is 0): top-k, top-p, then temperature, as
    /// [`Sampler::sample`]. A greedy sampler takes the first candidate.
    pub fn sample_candidates(&mut self, mut cand: Vec<(u32, f32)>) -> u32 {
        let c = self.config;
        if self.is_greedy() {
            return cand.first().map_or(0, |&(id, _)| id);
        }
        if c.top_k > 0 {
            cand.truncate(c.top_k);
        }
        if c.top_p < 1.0 {
            let probs = softmax_of(&cand, 1.0);
            let mut mass = 0.0;
            let keep = probs
                .iter()
                .position(|p| {
                    mass += p;
                    mass >= f64::from(c.top_p)
                })
                .map_or(cand.len(), |i| i + 1);
            cand.truncate(keep);
        }
        let probs = softmax_of(&cand, c.temperature);
        let mut r = self.rng.next_f64();
        for (&(id, _), p) in cand.iter().zip(&probs) {
            if r < *p {
                return id;
            }
            r -= p;
        }
        // Rounding left a sliver of mass past the last candidate.
        cand.last().map_or(0, |&(id, _)| id)
    }
}

/// The `k` largest logits as (id, logit), sorted by descending [`f32::total_cmp`] (a NaN with
/// the sign bit clear ranks above +inf, one with it set below -inf, -0 below +0), the lower id
/// first among equals: the candidates of [`Sampler::sample_candidates`].
pub fn top_k(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let mut cand: Vec<(u32, f32)> = (0u32..).zip(logits.iter().copied()).collect();
    if k < cand.len() {
        // Only the k kept need sorting.
        cand.select_nth_unstable_by(k, order);
        cand.truncate(k);
    }
    cand.sort_unstable_by(order);
    cand
}

/// Index of the largest logit; the lowest index wins ties.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// Probabilities of candidates sorted by descending logit, at temperature `t`.
fn softmax_of(cand: &[(u32, f32)], t: f32) -> Vec<f64> {
    let max = cand.first().map_or(0.0, |c| f64::from(c.1));
    let e: Vec<f64> = cand
        .iter()
        .map(|c| ((f64::from(c.1) - max) / f64::from(t)).exp())
        .collect();
    let sum: f64 = e.iter().sum();
    e.into_iter().map(|v| v / sum).collect()
}

/// xoshiro256** seeded through splitmix64: small, fast, reproducible across platforms.
#[derive(Clone, Debug)]
pub struct Rng([u64; 4]);

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let mut next = || {
            sm = sm.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Self([next(), next(), next(), next()])
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[-1, 1)`: handy for random test weights.
    pub fn next_signed_f32(&mut self) -> f32 {
        (self.next_f64() * 2.0 - 1.0) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> Sampler {
        Sampler::new(SamplerConfig {
            temperature,
            top_k,
            top_p,
            seed,
        })
    }

    #[test]
    fn greedy_is_argmax_first_on_ties() {
        let mut s = sampler(0.0, 0, 1.0, 0);
        assert_eq!(s.sample(&[0.1, 3.0, -1.0, 3.0]), 1);
    }

    #[test]
    fn top_k_one_is_greedy() {
        let mut s = sampler(1.5, 1, 1.0, 7);
        for _ in 0..50 {
            assert_eq!(s.sample(&[0.1, 2.0, 1.9, -1.0]), 1);
        }
    }

    #[test]
    fn top_p_keeps_nucleus() {
        // Probabilities ~ [0.665, 0.245, 0.090]: top-p 0.8 keeps the first two.
        let logits = [2.0, 1.0, 0.0];
        let mut s = sampler(1.0, 0, 0.8, 3);
        for _ in 0..200 {
            assert_ne!(s.sample(&logits), 2);
        }
    }

    #[test]
    fn seeded_and_follows_distribution() {
        let logits = [0.0f32, (3.0f32).ln()]; // p = [0.25, 0.75]
        let draw = |seed| {
            let mut s = sampler(1.0, 0, 1.0, seed);
            (0..4000).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        assert_eq!(draw(42), draw(42));
        let ones = draw(42).iter().filter(|&&t| t == 1).count() as f64 / 4000.0;
        assert!((ones - 0.75).abs() < 0.03, "{ones}");
    }

    /// 1000 random logits with the third largest value four times over, so that top-k 3 cuts
    /// through a tie.
    fn tied_logits() -> Vec<f32> {
        let mut rng = Rng::new(99);
        let mut logits: Vec<f32> = (0..1000).map(|_| rng.next_signed_f32() * 6.0).collect();
        let mut sorted = logits.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        for i in [990, 500, 10] {
            logits[i] = sorted[2];
        }
        logits
    }

    /// The draws the sampler made before it took candidate lists (recorded from the sampler
    /// that sorted the whole row), through both of today's paths.
    #[test]
    fn candidate_path_draws_what_the_full_sort_drew() {
        // (temperature, top_k, top_p); the seed is the setting's place from 1.
        let settings = [
            (0.8, 40, 1.0),
            (1.0, 40, 0.9),
            (1.5, 5, 0.95),
            (0.5, 256, 0.7),
            (2.0, 3, 1.0),
            (1.0, 2000, 0.99),
            (1.2, 0, 0.9),
        ];
        let recorded: [[u32; 12]; 7] = [
            [631, 603, 39, 620, 631, 500, 10, 620, 790, 772, 69, 290],
            [486, 226, 990, 631, 350, 126, 127, 522, 39, 631, 631, 752],
            [486, 486, 37, 10, 10, 37, 37, 486, 500, 163, 500, 486],
            [530, 187, 603, 849, 161, 700, 39, 46, 37, 620, 37, 676],
            [163, 37, 37, 10, 37, 10, 37, 10, 37, 37, 10, 163],
            [926, 77, 529, 194, 266, 486, 486, 714, 208, 819, 631, 226],
            [196, 631, 510, 147, 225, 3, 990, 161, 854, 620, 133, 83],
        ];
        let logits = tied_logits();
        for (seed, ((t, k, p), want)) in (1..).zip(settings.into_iter().zip(recorded)) {
            let mut full = sampler(t, k, p, seed);
            let mut candidates = sampler(t, k, p, seed);
            for &token in &want {
                assert_eq!(full.sample(&logits), token, "t {t} k {k} p {p}");
                let cand = match candidates.top_k() {
                    Some(k) => top_k(&logits, k),
                    None => top_k(&logits, logits.len()),
                };
                assert_eq!(
                    candidates.sample_candidates(cand),
                    token,
                    "t {t} k {k} p {p}"
                );
            }
        }
    }

    #[test]
    fn top_k_orders_as_total_cmp_then_lower_id() {
        let logits = [
            1.0,
            f32::NAN,
            -0.0,
            0.0,
            1.0,
            -f32::NAN,
            f32::NEG_INFINITY,
            2.0,
        ];
        let ids: Vec<u32> = top_k(&logits, 8).iter().map(|c| c.0).collect();
        assert_eq!(ids, [1, 7, 0, 4, 3, 2, 6, 5]);
        let ids: Vec<u32> = top_k(&logits, 3).iter().map(|c| c.0).collect();
        assert_eq!(ids, [1, 7, 0]);
        assert_eq!(top_k(&logits, 20).len(), 8);
    }

    #[test]
    fn rng_is_uniform() {
        let mut r = Rng::new(1);
        let mean = (0..10000).map(|_| r.next_f64()).sum::<f64>() / 10000.0;
        assert!((mean - 0.5).abs() < 0.02);
    }
}
