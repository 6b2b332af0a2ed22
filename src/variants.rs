//! The parser of `kernels/variants.txt`, shared by build.rs (which compiles the variants) and the
//! engine's tests. Standard library only, since build.rs includes this file as a module.
//!
//! One variant per line, `#` starts a comment:
//!
//! ```text
//! FAMILY [ARCH,ARCH...] NAME=VALUE[,NAME=VALUE...]
//! gemm_f16 BN=256,WN=64
//! gemm_f16 [sm_90] BN=256,WN=64,BK=64,STAGES=3,FB=2
//! ```
//!
//! Without an arch list the variant is built for every arch; with one, only for those archs (for
//! variants that need more shared memory than some archs have). Spaces inside the defines are
//! ignored; the registry key is `KERNEL@` followed by the defines without spaces.
//!
//! A line names a family (a file), but only some of the file's kernels take it: see [`Selection`].

use std::collections::HashMap;
use std::fmt;

/// One line of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    pub family: String,
    /// The archs this variant is built for; None for all.
    pub archs: Option<Vec<String>>,
    /// `NAME=VALUE,...` as written (spaces removed): the registry key's suffix.
    pub defines: String,
    /// 1-based line number, for messages.
    pub line: usize,
}

impl Variant {
    /// Whether this variant is built for `arch`.
    /// Whether the variant is built for `arch`; an arch-specific build (sm_90a) counts as its
    /// base arch (sm_90), whose instructions it has.
    pub fn for_arch(&self, arch: &str) -> bool {
        let base = arch.strip_suffix('a').unwrap_or(arch);
        self.archs
            .as_ref()
            .is_none_or(|archs| archs.iter().any(|a| a == arch || a == base))
    }

    /// The defines as (name, value) pairs, for the compiler's `-D`.
    pub fn define_pairs(&self) -> Vec<(String, String)> {
        self.defines
            .split(',')
            .filter_map(|d| d.split_once('='))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }
}

/// A kernel's compile-time parameters with the values one build gives them, in declaration
/// order (the checker's specialization, values as text). Two builds of a kernel with equal
/// specializations are the same code.
pub type Specialization = Vec<(String, String)>;

/// Which builds of each kernel are registered. Every kernel of a family is compiled with a
/// line's defines, but `-D` only sets the parameters a kernel declares, so a kernel that lacks
/// one of the line's parameters (matvec_q6k has no XS) would be built as a copy of another
/// build. A kernel takes a line only if:
/// - it declares every parameter the line sets, and
/// - the line gives it a specialization none of its builds for those archs has yet (its defaults,
///   an earlier line). The first rule does not imply this one: a line may restate defaults
///   (`matvec KW=4` is matvec_q6k's default), two lines may differ only in values one kernel
///   takes as defaults, and a kernel instance (`kernel gemm_q5k = gemm_q4k<FIFTH = 1>;`) lists
///   the parameters it fixes in its specialization, while `-D` cannot change them. The
///   repository's file needs only the first rule today (2026-11-30); the second keeps such
///   lines from building copies, and lets build.rs reject a line that builds nothing new.
#[derive(Debug, Default)]
pub struct Selection {
    /// Per kernel, the builds registered so far.
    builds: HashMap<String, Vec<Build>>,
}

#[derive(Debug)]
struct Build {
    specialization: Specialization,
    /// None for all.
    archs: Option<Vec<String>>,
}

impl Selection {
    /// Records the build of `kernel` with its defaults, for every arch.
    pub fn add_default(&mut self, kernel: &str, specialization: Specialization) {
        self.builds
            .entry(kernel.to_string())
            .or_default()
            .push(Build {
                specialization,
                archs: None,
            });
    }

    /// Whether `kernel`, compiled with `variant`'s defines to `specialization`, is registered as
    /// `kernel@DEFINES` (see [`Selection`]); if so, the build is recorded.
    pub fn admit(
        &mut self,
        kernel: &str,
        variant: &Variant,
        specialization: Specialization,
    ) -> bool {
        let declares = |name: &str| specialization.iter().any(|(n, _)| n == name);
        if !variant
            .define_pairs()
            .iter()
            .all(|(name, _)| declares(name))
        {
            return false;
        }
        let builds = self.builds.entry(kernel.to_string()).or_default();
        let covered = builds.iter().any(|b| {
            b.specialization == specialization
                && archs_cover(b.archs.as_deref(), variant.archs.as_deref())
        });
        if !covered {
            builds.push(Build {
                specialization,
                archs: variant.archs.clone(),
            });
        }
        !covered
    }
}

/// Whether a build for `outer` archs exists wherever one for `inner` is wanted (None: all).
fn archs_cover(outer: Option<&[String]>, inner: Option<&[String]>) -> bool {
    match (outer, inner) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(outer), Some(inner)) => inner.iter().all(|a| outer.contains(a)),
    }
}

/// A malformed line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

const FORMAT: &str = "expected `FAMILY [ARCH,...] NAME=VALUE[,NAME=VALUE...]`";

/// Every variant of `text`, in order.
pub fn parse(text: &str) -> Result<Vec<Variant>, ParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let error = |message: String| ParseError {
            line: i + 1,
            message,
        };
        let (family, rest) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| error(FORMAT.to_string()))?;
        if !family
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(error(format!(
                "`{family}` is not a kernel family name; {FORMAT}"
            )));
        }
        let rest = rest.trim_start();
        let (archs, defines) = match rest.strip_prefix('[') {
            Some(list) => {
                let (list, defines) = list
                    .split_once(']')
                    .ok_or_else(|| error(format!("the arch list has no closing `]`; {FORMAT}")))?;
                (Some(arch_list(list).map_err(error)?), defines)
            }
            None => (None, rest),
        };
        let defines: String = defines.chars().filter(|c| !c.is_whitespace()).collect();
        if defines.is_empty() {
            return Err(error(format!("no defines after `{family}`; {FORMAT}")));
        }
        if let Some(bad) = defines.split(',').find(|d| {
            d.split_once('=')
                .is_none_or(|(n, v)| n.is_empty() || v.is_empty())
        }) {
            return Err(error(format!(
                "`{bad}` in `{defines}` is not NAME=VALUE; {FORMAT}"
            )));
        }
        out.push(Variant {
            family: family.to_string(),
            archs,
            defines,
            line: i + 1,
        });
    }
    Ok(out)
}

/// `sm_90, sm_120`: non-empty, each `sm_` and digits with an optional suffix letter.
fn arch_list(list: &str) -> Result<Vec<String>, String> {
    let archs: Vec<String> = list.split(',').map(|a| a.trim().to_string()).collect();
    for a in &archs {
        let digits = a
            .strip_prefix("sm_")
            .map(|d| d.trim_end_matches(['a', 'f']));
        if !digits.is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit())) {
            return Err(format!(
                "`{a}` is not an arch (like `sm_90`) in the arch list `[{list}]`"
            ));
        }
    }
    Ok(archs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_arch_limited_lines() {
        let text = "# comment\n\ngemm_simt  BM=128, BN=64\ngemm_f16 [sm_90] BM=256,WM=64 # wide\n\
                    gemm_f16 [sm_90, sm_120] BK=64\n";
        let v = parse(text).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].family, "gemm_simt");
        assert_eq!(v[0].defines, "BM=128,BN=64");
        assert_eq!(v[0].archs, None);
        assert_eq!(v[0].line, 3);
        assert!(v[0].for_arch("sm_89"));
        assert_eq!(v[1].archs, Some(vec!["sm_90".to_string()]));
        assert_eq!(v[1].defines, "BM=256,WM=64");
        assert!(v[1].for_arch("sm_90") && !v[1].for_arch("sm_89"));
        assert!(v[1].for_arch("sm_90a") && !v[1].for_arch("sm_120a"));
        assert!(v[2].for_arch("sm_120") && !v[2].for_arch("sm_89"));
        assert_eq!(
            v[1].define_pairs(),
            vec![
                ("BM".to_string(), "256".to_string()),
                ("WM".to_string(), "64".to_string())
            ]
        );
    }

    fn error(text: &str) -> ParseError {
        parse(text).unwrap_err()
    }

    #[test]
    fn bad_lines_name_their_line() {
        let e = error("gemm_f16 BK=64\n\ngemm_f16\n");
        assert_eq!(e.line, 3);
        assert!(e.message.contains("expected `FAMILY"), "{e}");
        let e = error("gemm_f16 [sm_90 BK=64\n");
        assert_eq!(
            (e.line, e.message.contains("no closing `]`")),
            (1, true),
            "{e}"
        );
        let e = error("x BK=64\ngemm_f16 [sm90] BK=64\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("`sm90` is not an arch"), "{e}");
        let e = error("gemm_f16 [] BK=64\n");
        assert!(e.message.contains("`` is not an arch"), "{e}");
        let e = error("gemm_f16 [sm_90]\n");
        assert!(e.message.contains("no defines"), "{e}");
        let e = error("gemm_f16 BK=64,STAGES\n");
        assert!(e.message.contains("`STAGES` in `BK=64,STAGES`"), "{e}");
        let e = error("gemm-f16 BK=64\n");
        assert!(e.message.contains("not a kernel family name"), "{e}");
        assert_eq!(e.to_string(), format!("line 1: {}", e.message));
    }

    fn specialization(pairs: &[(&str, &str)]) -> Specialization {
        pairs
            .iter()
            .map(|&(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_kernel_takes_a_line_that_sets_only_its_parameters() {
        let lines = parse(
            "matvec TMAX=1,RG=4\nmatvec TMAX=1,RG=4,XS=1\nmatvec TMAX=1,RG=4,XS=0\n\
             matvec TMAX=1,XS=1\nmatvec TMAX=8\n",
        )
        .unwrap();
        let mut selection = Selection::default();
        let q4k = |tmax, rg, xs| specialization(&[("TMAX", tmax), ("RG", rg), ("XS", xs)]);
        let q6k = |tmax, rg| specialization(&[("TMAX", tmax), ("RG", rg)]);
        selection.add_default("matvec_q4k", q4k("8", "1", "0"));
        selection.add_default("matvec_q6k", q6k("8", "1"));
        let mut admit = |kernel, line: usize, spec| selection.admit(kernel, &lines[line], spec);
        assert!(admit("matvec_q4k", 0, q4k("1", "4", "0")));
        assert!(admit("matvec_q6k", 0, q6k("1", "4")));
        assert!(admit("matvec_q4k", 1, q4k("1", "4", "1")));
        // matvec_q6k has no XS: its build of line 1 would be line 0's.
        assert!(!admit("matvec_q6k", 1, q6k("1", "4")));
        // XS=0 is matvec_q4k's default: line 2 restates line 0 for it.
        assert!(!admit("matvec_q4k", 2, q4k("1", "4", "0")));
        assert!(admit("matvec_q4k", 3, q4k("1", "1", "1")));
        // TMAX=8 is every default.
        assert!(!admit("matvec_q4k", 4, q4k("8", "1", "0")));
        assert!(!admit("matvec_q6k", 4, q6k("8", "1")));
    }

    #[test]
    fn a_build_for_some_archs_does_not_stand_in_for_one_for_all() {
        let lines =
            parse("gemm [sm_90] BK=64\ngemm BK=64,BM=128\ngemm [sm_90,sm_120] BM=128,BK=64\n")
                .unwrap();
        let mut selection = Selection::default();
        selection.add_default("gemm", specialization(&[("BM", "128"), ("BK", "32")]));
        let bk64 = || specialization(&[("BM", "128"), ("BK", "64")]);
        assert!(selection.admit("gemm", &lines[0], bk64()));
        // The same build again, but for every arch: sm_89 must have it too.
        assert!(selection.admit("gemm", &lines[1], bk64()));
        assert!(!selection.admit("gemm", &lines[2], bk64()));
        assert!(archs_cover(None, Some(&["sm_90".to_string()])));
        assert!(!archs_cover(Some(&["sm_90".to_string()]), None));
    }

    /// The repository's own file parses, and its arch-limited variants name built archs.
    #[test]
    fn the_kernel_library_list_parses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/variants.txt");
        let v = parse(&std::fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{e}"));
        let limited: Vec<&Variant> = v.iter().filter(|v| v.archs.is_some()).collect();
        assert!(!limited.is_empty());
        assert!(limited
            .iter()
            .all(|v| v.for_arch("sm_90") && !v.for_arch("sm_89")));
    }
}
