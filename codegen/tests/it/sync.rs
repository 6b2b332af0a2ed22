//! Handing values over between blocks: `fence_gpu()` is `membar.gl`, `sync_warp()` the whole
//! warp's `bar.warp.sync` and `nanosleep(ns)` `nanosleep.u32`, on every user arch, and ptxas
//! takes them; so do the timers a kernel stamps its own timeline with.

use super::ptxas::sass_of;
use super::ARCHS;
use zinc_codegen::{compile, Emit, Options};

/// Blocks handing sums over (interp/tests/handover.rs runs it).
const SOURCE: &str = include_str!("../../../interp/tests/handover.tile");

#[test]
fn fences_and_warp_syncs_reach_the_ptx_of_every_arch() {
    let c = zinc_dsl::compile_source("sync.tile", SOURCE, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()));
    for arch in ARCHS {
        let out = compile(&c.module, &Options::new(arch, None).unwrap(), Emit::Ptx)
            .unwrap_or_else(|e| panic!("{arch}: {e}"));
        let ptx: String = (out.text.lines())
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") + "\n")
            .collect();
        assert_eq!(ptx.matches("membar.gl;").count(), 2, "{arch}:\n{ptx}");
        assert_eq!(ptx.matches("bar.warp.sync -1;").count(), 1, "{arch}");
        assert_eq!(ptx.matches("nanosleep.u32 64;").count(), 1, "{arch}");
        assert!(
            ptx.contains("atom.global.cas.b32") || ptx.contains(".cas.b32"),
            "{arch}"
        );
        sass_of(&out.text, arch, "sync");
    }
}

/// `clock64()` and `globaltimer()` read their special registers on every user arch, each read
/// where it is written (two reads of one clock stay two), and ptxas takes them.
#[test]
fn timers_read_their_registers() {
    let source = "kernel stamps(out: global mut [u32]) grid(1) block(32) {
        let a = clock64();
        let t = globaltimer();
        out[thread.x] = (clock64() - a) as u32;
        out[32 + thread.x] = (t >> 32) as u32;
    }";
    let c = zinc_dsl::compile_source("stamps.tile", source, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()));
    for arch in ARCHS {
        let out = compile(&c.module, &Options::new(arch, None).unwrap(), Emit::Ptx)
            .unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(
            out.text.matches("%clock64;").count(),
            2,
            "{arch}:\n{}",
            out.text
        );
        assert_eq!(out.text.matches("%globaltimer;").count(), 1, "{arch}");
        sass_of(&out.text, arch, "stamps");
    }
}
