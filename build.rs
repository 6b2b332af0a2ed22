//! Compiles the kernel library with zinc's own compiler and embeds it in the engine.
//!
//! Every `.tile` file directly under `kernels/` is a kernel family (files under `kernels/lib/` are
//! only imported). Each family is compiled with its defaults, plus once per line naming it in
//! `kernels/variants.txt` (format in src/variants.rs), for every arch in `ZINC_ARCHS` (default
//! below) or, for a line with an arch list, for those of its archs that are built. A line's
//! module keeps only the kernels that declare every parameter it sets and that it gives a build
//! they do not have yet (`variants::Selection`); a line that gives none is an error. A kernel
//! whose PTX for an arch comes out the same as an earlier build's (a parameter it ignores, as
//! Q8_0 ignores SHFL_SCALES) is registered as a copy of that build (`same_as`), its entry dropped
//! from the line's module: the engine may ask for either name, `bench-kernels --tune` and
//! `selftest` run the code once. The result is
//! `$OUT_DIR/kernels.rs`: a static table, per arch, of PTX modules (one per family and variant,
//! pulled in with `include_str!`) and each kernel's launch manifest, which `src/registry.rs`
//! includes. A compile error fails the build with the compiler's rendered diagnostics.
//!
//! The table also carries every `.tile` source under `kernels/` (families and what they import),
//! so that the emulated device (src/emulator.rs) can compile the kernels to IR at run time.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use zinc_codegen::{CodegenError, Emit, KernelInfo, Options};
use zinc_dsl::ir::{FunctionKind, Module as IrModule};

#[path = "src/variants.rs"]
mod variants;

const DEFAULT_ARCHS: &str = "sm_89,sm_90a,sm_120";
const VARIANTS_FILE: &str = "variants.txt";

fn main() {
    if let Err(message) = run() {
        eprintln!("{message}");
        std::process::exit(1);
    }
}

/// One compilation of a family: its defaults, or a variant's `-D` overrides.
struct Job {
    family: String,
    path: PathBuf,
    /// None for the defaults.
    variant: Option<variants::Variant>,
}

impl Job {
    /// The registry key of one of this job's kernels: `kernel` or `kernel@NAME=VALUE,...`.
    fn key(&self, kernel: &str) -> String {
        match &self.variant {
            None => kernel.to_string(),
            Some(v) => format!("{kernel}@{}", v.defines),
        }
    }

    fn defines(&self) -> Vec<(String, String)> {
        self.variant
            .as_ref()
            .map_or_else(Vec::new, variants::Variant::define_pairs)
    }

    fn for_arch(&self, arch: &str) -> bool {
        self.variant.as_ref().is_none_or(|v| v.for_arch(arch))
    }
}

/// One compiled module for one arch.
struct Module {
    key: String,
    family: String,
    defines: Vec<(String, String)>,
    ptx_path: PathBuf,
    kernels: Vec<Entry>,
}

/// A kernel of a module: its registry key, its manifest JSON, and for a copy, the key of the
/// earlier build whose code it is (the entry in this module's PTX is then that build's).
struct Entry {
    key: String,
    manifest: String,
    same_as: Option<String>,
}

/// A distinct build of a kernel for one arch, for finding copies of it.
struct Build {
    /// Its PTX entry, normalized by [`normalized_entry`].
    code: String,
    /// Its manifest without the specialization.
    launch: KernelInfo,
    /// Its module's index in the arch's table.
    module: usize,
    key: String,
}

/// The builds of one arch so far, per kernel symbol.
type Builds = std::collections::HashMap<String, Vec<Build>>;

fn run() -> Result<(), String> {
    let root = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(env("OUT_DIR")?);
    let kernels_dir = root.join("kernels");
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-env-changed=ZINC_ARCHS");

    let archs = std::env::var("ZINC_ARCHS").unwrap_or_else(|_| DEFAULT_ARCHS.to_string());
    let options = archs
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| Options::new(a, None).map_err(|e| format!("ZINC_ARCHS: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if options.is_empty() {
        return Err("ZINC_ARCHS names no arch".to_string());
    }

    let jobs = jobs(&kernels_dir)?;
    let mut selection = variants::Selection::default();
    let mut table: Vec<(&str, Vec<Module>)> =
        options.iter().map(|o| (o.arch.name, Vec::new())).collect();
    let mut builds: Vec<Builds> = options.iter().map(|_| Builds::new()).collect();
    for job in &jobs {
        let mut compilation = zinc_dsl::compile_file(&job.path, &job.defines()).map_err(|f| {
            format!(
                "error: kernel family `{}` does not compile:\n{}",
                job.family,
                f.render()
            )
        })?;
        select_kernels(job, &mut compilation.module, &mut selection)?;
        // Kernels on sm_90a's instructions (wgmma) are built for sm_90a alone.
        let sm90a_only: Vec<String> = (compilation.module.functions.iter())
            .filter(|f| matches!(f.kind, FunctionKind::Kernel(_)))
            .filter(|f| zinc_dsl::ir::needs_sm90a(&compilation.module, f))
            .map(|f| f.name.clone())
            .collect();
        let mut portable = compilation.module.clone();
        portable.retain_kernels(|name| !sm90a_only.iter().any(|k| k == name));
        for ((opts, (arch, modules)), builds) in options.iter().zip(&mut table).zip(&mut builds) {
            if !job.for_arch(arch) {
                continue;
            }
            let module = match *arch == "sm_90a" {
                true => &compilation.module,
                false => &portable,
            };
            if !module
                .functions
                .iter()
                .any(|f| matches!(f.kind, FunctionKind::Kernel(_)))
            {
                continue;
            }
            let output = zinc_codegen::compile(module, opts, Emit::Ptx)
                .map_err(|e| codegen_failure(job, arch, e, &compilation.sources))?;
            let (ptx, kernels) = register_kernels(job, &output, modules, builds)?;
            if kernels.is_empty() {
                continue;
            }
            let key = job.key(&job.family);
            let dir = out_dir.join("kernels").join(arch);
            fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
            let ptx_path = dir.join(format!("{key}.ptx"));
            fs::write(&ptx_path, &ptx)
                .map_err(|e| format!("writing {}: {e}", ptx_path.display()))?;
            modules.push(Module {
                key,
                family: job.family.clone(),
                defines: job.defines(),
                ptx_path,
                kernels,
            });
        }
    }
    check_unique_keys(&table)?;
    let mut generated_text = render_table(&table);
    generated_text += &render_sources(&kernels_dir)?;
    let generated = out_dir.join("kernels.rs");
    fs::write(&generated, generated_text)
        .map_err(|e| format!("writing {}: {e}", generated.display()))
}

/// The kernels of `output` (compiled from `job` for one arch, whose `modules` and `builds` so
/// far are given) to register: each is a new build, or a copy of an earlier one, which is
/// registered beside it in its module and dropped from `output`'s PTX. Returns the PTX of the
/// new builds and their entries (none: the module is not needed).
fn register_kernels(
    job: &Job,
    output: &zinc_codegen::Output,
    modules: &mut [Module],
    builds: &mut Builds,
) -> Result<(String, Vec<Entry>), String> {
    let mut ptx = output.text.clone();
    let mut kernels = Vec::new();
    for k in &output.kernels {
        let (key, manifest) = (job.key(&k.name), k.to_json());
        let code = normalized_entry(&output.text, &k.name).ok_or_else(|| {
            format!(
                "error: no entry `{}` in the PTX of {}",
                k.name,
                job.key(&job.family)
            )
        })?;
        let launch = KernelInfo {
            specialization: Vec::new(),
            ..k.clone()
        };
        let earlier = builds.entry(k.name.clone()).or_default();
        match earlier
            .iter()
            .find(|b| b.code == code && b.launch == launch)
        {
            // The same code as an earlier build (a parameter this kernel ignores).
            Some(original) => {
                modules[original.module].kernels.push(Entry {
                    key,
                    manifest,
                    same_as: Some(original.key.clone()),
                });
                ptx = without_entry(&ptx, &k.name);
            }
            None => {
                earlier.push(Build {
                    code,
                    launch,
                    module: modules.len(),
                    key: key.clone(),
                });
                kernels.push(Entry {
                    key,
                    manifest,
                    same_as: None,
                });
            }
        }
    }
    Ok((ptx, kernels))
}

/// The span of kernel `name`'s entry in `ptx`: from `.visible .entry NAME(` to its closing brace.
fn entry_span(ptx: &str, name: &str) -> Option<std::ops::Range<usize>> {
    let start = ptx.find(&format!(".visible .entry {name}("))?;
    let end = start + ptx[start..].find("\n}\n")? + 3;
    Some(start..end)
}

/// Kernel `name`'s entry in `ptx` with what differs between two modules holding the same code
/// renamed: the symbol (its parameters' names), LLVM's block labels (numbered by function within
/// the module) and the mbarrier waits' labels (codegen's `${:uid}`, numbered within the
/// compilation), each label by the order it first appears in.
fn normalized_entry(ptx: &str, name: &str) -> Option<String> {
    let text = ptx[entry_span(ptx, name)?].replace(name, "KERNEL");
    let mut out = String::with_capacity(text.len());
    let mut labels: Vec<&str> = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = ["$L__BB", "zinc_wait_"]
        .iter()
        .filter_map(|p| rest.find(p))
        .min()
    {
        out.push_str(&rest[..at]);
        let len = rest[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(rest.len() - at);
        let label = &rest[at..at + len];
        let id = labels.iter().position(|l| *l == label).unwrap_or_else(|| {
            labels.push(label);
            labels.len() - 1
        });
        let _ = write!(out, "L{id}");
        rest = &rest[at + len..];
    }
    out.push_str(rest);
    Some(out)
}

/// `ptx` without kernel `name`'s entry and the comment LLVM puts before it.
fn without_entry(ptx: &str, name: &str) -> String {
    let mut out = ptx.to_string();
    if let Some(span) = entry_span(&out, name) {
        out.replace_range(span, "");
    }
    out.replacen(&format!("\t// .globl\t{name}\n"), "", 1)
}

/// `static KERNEL_SOURCES: &[(&str, &str)]`: every `.tile` file under `dir`, by its path
/// relative to `dir` (how imports name them), sorted.
fn render_sources(dir: &Path) -> Result<String, String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        let entries = fs::read_dir(&at).map_err(|e| format!("reading {}: {e}", at.display()))?;
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|x| x == "tile") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut s = String::from("static KERNEL_SOURCES: &[(&str, &str)] = &[\n");
    for path in files {
        let relative = path.strip_prefix(dir).map_err(|e| e.to_string())?;
        let _ = writeln!(
            s,
            "    ({:?}, include_str!({:?})),",
            relative.display().to_string(),
            path.display().to_string()
        );
    }
    s.push_str("];\n");
    Ok(s)
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

/// The families under `kernels/` (sorted, for a reproducible table) and their variants.
fn jobs(kernels_dir: &Path) -> Result<Vec<Job>, String> {
    let entries =
        fs::read_dir(kernels_dir).map_err(|e| format!("reading {}: {e}", kernels_dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "tile"))
        .collect();
    files.sort();
    let mut jobs: Vec<Job> = files
        .into_iter()
        .map(|path| Job {
            family: path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            path,
            variant: None,
        })
        .collect();

    let variants_path = kernels_dir.join(VARIANTS_FILE);
    let text = fs::read_to_string(&variants_path)
        .map_err(|e| format!("reading {}: {e}", variants_path.display()))?;
    let parsed = variants::parse(&text)
        .map_err(|e| format!("{}:{}: {}", variants_path.display(), e.line, e.message))?;
    for v in parsed {
        let at = format!("{}:{}", variants_path.display(), v.line);
        for arch in v.archs.iter().flatten() {
            Options::new(arch, None).map_err(|e| format!("{at}: {e}"))?;
        }
        let path = jobs
            .iter()
            .find(|j| j.family == v.family)
            .map(|j| j.path.clone())
            .ok_or_else(|| format!("{at}: no kernel family `{0}` (kernels/{0}.tile)", v.family))?;
        jobs.push(Job {
            family: v.family.clone(),
            path,
            variant: Some(v),
        });
    }
    Ok(jobs)
}

/// Records the kernels of a family's default build; of a variant's, keeps in `module` only the
/// kernels that take it (see `variants::Selection`), and fails if there are none.
fn select_kernels(
    job: &Job,
    module: &mut IrModule,
    selection: &mut variants::Selection,
) -> Result<(), String> {
    let kernels = module.functions.iter().filter_map(|f| match &f.kind {
        // Values as text only to compare them.
        FunctionKind::Kernel(launch) => Some((
            f.name.clone(),
            launch
                .specialization
                .iter()
                .map(|(name, value)| (name.clone(), format!("{value:?}")))
                .collect::<variants::Specialization>(),
        )),
        FunctionKind::Device => None,
    });
    let Some(variant) = &job.variant else {
        for (name, specialization) in kernels {
            selection.add_default(&name, specialization);
        }
        return Ok(());
    };
    let taken: Vec<String> = kernels
        .filter(|(name, specialization)| selection.admit(name, variant, specialization.clone()))
        .map(|(name, _)| name)
        .collect();
    if taken.is_empty() {
        return Err(format!(
            "error: kernels/{VARIANTS_FILE}:{}: `{}` builds no kernel of `{}` anew: each lacks one of \
             its parameters or has that build already (its defaults or an earlier line)",
            variant.line, variant.defines, job.family
        ));
    }
    module.retain_kernels(|name| taken.iter().any(|t| t == name));
    Ok(())
}

fn codegen_failure(
    job: &Job,
    arch: &str,
    error: CodegenError,
    sources: &zinc_dsl::diag::SourceMap,
) -> String {
    let detail = match &error {
        CodegenError::Diagnostics(diags) => diags
            .iter()
            .map(|d| zinc_dsl::render(d, sources))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    };
    let name = job.key(&job.family);
    format!("error: kernel family `{name}` does not compile for {arch}:\n{detail}")
}

fn check_unique_keys(table: &[(&str, Vec<Module>)]) -> Result<(), String> {
    for (_, modules) in table {
        let mut keys: Vec<&str> = modules
            .iter()
            .flat_map(|m| m.kernels.iter().map(|k| k.key.as_str()))
            .collect();
        keys.sort_unstable();
        if let Some(dup) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!(
                "error: kernel `{}` is defined twice (by two families under kernels/, or by two variants.txt lines with the same defines)",
                dup[0]
            ));
        }
    }
    Ok(())
}

/// The generated Rust: `static EMBEDDED: &[EmbeddedArch]` (types in src/registry.rs).
fn render_table(table: &[(&str, Vec<Module>)]) -> String {
    let mut s = String::from("// Generated by build.rs from kernels/; do not edit.\n");
    s.push_str("static EMBEDDED: &[EmbeddedArch] = &[\n");
    for (arch, modules) in table {
        let _ = writeln!(s, "    EmbeddedArch {{ arch: {arch:?}, modules: &[");
        for m in modules {
            let _ = writeln!(
                s,
                "        EmbeddedModule {{ name: {:?}, family: {:?}, defines: &{:?}, ptx: include_str!({:?}), kernels: &[",
                m.key,
                m.family,
                m.defines,
                m.ptx_path.display().to_string()
            );
            for k in &m.kernels {
                let _ = writeln!(
                    s,
                    "            EmbeddedKernel {{ name: {:?}, manifest: {:?}, same_as: {:?} }},",
                    k.key, k.manifest, k.same_as
                );
            }
            s.push_str("        ] },\n");
        }
        s.push_str("    ] },\n");
    }
    s.push_str("];\n");
    s
}
