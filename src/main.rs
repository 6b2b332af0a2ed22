//! `zinc`: the inference engine's command line. Each subcommand lives in its own `cmd_*` module
//! with a clap `Args` struct and a `run` function.

mod cmd_bench;
mod cmd_bench_model;
mod cmd_check_model;
mod cmd_devices;
mod cmd_info;
mod cmd_run;
mod cmd_selftest;
mod cmd_synth;
mod emulator;
mod gpu;
mod harness;
mod reference;
mod registry;
mod specs;
mod stamps;
#[cfg(test)]
mod variants;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "zinc",
    version,
    about = "Run GGUF language models on NVIDIA GPUs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a GGUF model's architecture, size, tensor types and tokenizer.
    Info(cmd_info::Args),
    /// Write a synthetic real-shape model with random weights: Q4_K_M, or retyped (--retype).
    Synth(cmd_synth::Args),
    /// Generate text from a prompt.
    Run(cmd_run::Args),
    /// Measure a model's prefill and generation throughput (llama-bench style).
    Bench(cmd_bench_model::Args),
    /// Compare a model's logits on the GPU with the CPU reference.
    CheckModel(cmd_check_model::Args),
    /// List the GPUs and their properties.
    Devices,
    /// Check every embedded kernel against its CPU reference on random inputs.
    Selftest(cmd_selftest::Args),
    /// Time embedded kernels against cuBLAS or device copy bandwidth, in the same run.
    BenchKernels(cmd_bench::Args),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Info(args) => cmd_info::run(&args),
        Command::Synth(args) => cmd_synth::run(&args),
        Command::Run(args) => cmd_run::run(&args),
        Command::Bench(args) => cmd_bench_model::run(&args),
        Command::CheckModel(args) => cmd_check_model::run(&args),
        Command::Devices => cmd_devices::run(),
        Command::Selftest(args) => cmd_selftest::run(&args),
        Command::BenchKernels(args) => cmd_bench::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line with the whole context chain: "reading x.gguf: tensor '...' ...".
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
