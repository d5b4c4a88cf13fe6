//! Build-script support for the crates of caustic that carry CUDA kernels.
//!
//! Each algorithm keeps its kernels next to its Rust code (`src/points/
//! kdtree/build.cu` beside `build_cuda.rs`). A crate's `build.rs` calls
//! [`Kernels::generate`], which walks `src/`, and writes
//! `$OUT_DIR/cuda_kernels.rs`:
//!
//! - a `HEADERS` set with every `src/**/*.cuh` of the crate (plus headers
//!   generated at run time, such as the layout headers), which a module of
//!   this crate or of a crate depending on it may `#include` by file name;
//! - per `src/**/<name>.cu` a Rust module (`points_kdtree_build` for
//!   `src/points/kdtree/build.cu`) with a `MODULE` static (the source,
//!   embedded, and the header sets it sees) and one typed constant per
//!   `extern "C" __global__` kernel: `POINT_KDTREE_SMALL: Kernel<(Ptr<f32>,
//!   u32, PtrMut<u32>)>`. The type is the kernel's parameter list, read from
//!   the CUDA signature, so a launch with a missing, extra, reordered or
//!   mistyped argument is a Rust compile error rather than a fault on the
//!   GPU machine;
//! - `MODULES`, every module of the crate, for the NVRTC compile test.
//!
//! A pointer parameter `const T*` becomes `Ptr<R>`, `T*` becomes
//! `PtrMut<R>`, where `R` is `T`'s Rust twin: built in for the CUDA scalars,
//! `float4` (`[f32; 4]`) and `Aabb`, and declared by the crate with
//! [`Kernels::ty`] for its own records. A type nobody declared stops the
//! build with a message naming the kernel and parameter.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

/// The generator's settings for one crate.
#[derive(Debug, Default)]
pub struct Kernels {
    runtime: String,
    header_dependencies: Vec<String>,
    generated_headers: Vec<(String, String)>,
    types: Vec<(String, String)>,
}

/// CUDA scalar types that may be passed by value, with their Rust twins.
const SCALARS: &[(&str, &str)] = &[
    ("u32", "u32"),
    ("unsigned int", "u32"),
    ("u64", "u64"),
    ("unsigned long long", "u64"),
    ("int", "i32"),
    ("float", "f32"),
    ("double", "f64"),
];

/// Pointee types every crate knows (besides the scalars).
const COMMON_TYPES: &[(&str, &str)] = &[("float4", "[f32; 4]"), ("Aabb", "::caustic_geom::Aabb")];

impl Kernels {
    /// Settings for a crate that uses the runtime `caustic_gpu`.
    pub fn new() -> Kernels {
        Kernels {
            runtime: "::caustic_gpu".into(),
            ..Kernels::default()
        }
    }

    /// The path of the runtime crate as seen from the generated code
    /// (`crate` inside caustic-gpu itself).
    pub fn runtime(mut self, path: &str) -> Kernels {
        self.runtime = path.into();
        self
    }

    /// A `HeaderSet` static of a dependency whose headers this crate's
    /// modules include (`::caustic_accel::kernels::HEADERS`). The runtime's
    /// own headers are always visible.
    pub fn headers_from(mut self, static_path: &str) -> Kernels {
        self.header_dependencies.push(static_path.into());
        self
    }

    /// A header generated at run time by `function` (`fn() -> &'static
    /// str`), offered to NVRTC under `name`.
    pub fn generated_header(mut self, name: &str, function: &str) -> Kernels {
        self.generated_headers.push((name.into(), function.into()));
        self
    }

    /// Declares that the CUDA struct `cuda` is the Rust type `rust` (a path
    /// usable from the crate root, `crate::photon::GpuPhoton`).
    pub fn ty(mut self, cuda: &str, rust: &str) -> Kernels {
        self.types.push((cuda.into(), rust.into()));
        self
    }

    /// Scans `src/` and writes `$OUT_DIR/cuda_kernels.rs`. Panics (failing
    /// the build with the message) on a signature it cannot type.
    pub fn generate(self) {
        let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets this"));
        let crate_name = env::var("CARGO_PKG_NAME").expect("cargo sets this");
        let src = manifest.join("src");
        println!("cargo:rerun-if-changed=src");
        let mut files = Vec::new();
        collect_files(&src, &mut files);
        let mut modules = Vec::new();
        let mut headers = Vec::new();
        for path in files {
            let relative = path
                .strip_prefix(&src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            if relative.ends_with(".cu") {
                println!("cargo:rerun-if-changed={}", path.display());
                let source = fs::read_to_string(&path).expect("readable kernel source");
                let kernels = parse_kernels(&source)
                    .unwrap_or_else(|message| panic!("src/{relative}: {message}"));
                modules.push(SourceModule { relative, kernels });
            } else if relative.ends_with(".cuh") {
                println!("cargo:rerun-if-changed={}", path.display());
                headers.push(relative);
            }
        }
        let text = self
            .emit(&crate_name, &modules, &headers)
            .unwrap_or_else(|message| panic!("{crate_name}: {message}"));
        let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets this"));
        fs::write(out.join("cuda_kernels.rs"), text).expect("writable OUT_DIR");
    }

    fn rust_type(&self, cuda: &str) -> Option<String> {
        SCALARS
            .iter()
            .chain(COMMON_TYPES)
            .map(|(c, r)| (*c, *r))
            .chain(self.types.iter().map(|(c, r)| (c.as_str(), r.as_str())))
            .find(|(c, _)| *c == cuda)
            .map(|(_, r)| r.to_owned())
    }

    fn param_type(&self, param: &Param) -> Result<String, String> {
        match param.pointer {
            Pointer::No => SCALARS
                .iter()
                .find(|(c, _)| *c == param.ty)
                .map(|(_, r)| (*r).to_owned())
                .ok_or_else(|| {
                    format!(
                        "parameter `{}`: type `{}` cannot be passed by value (pass scalars or pointers)",
                        param.name, param.ty
                    )
                }),
            Pointer::Const | Pointer::Mut => {
                let pointee = self.rust_type(&param.ty).ok_or_else(|| {
                    format!(
                        "parameter `{}`: no Rust twin declared for `{}` (add `.ty(\"{}\", \"crate::path::Type\")` in build.rs)",
                        param.name, param.ty, param.ty
                    )
                })?;
                let marker = if param.pointer == Pointer::Const {
                    "Ptr"
                } else {
                    "PtrMut"
                };
                Ok(format!("{marker}<{pointee}>"))
            }
        }
    }

    fn emit(
        &self,
        crate_name: &str,
        modules: &[SourceModule],
        headers: &[String],
    ) -> Result<String, String> {
        let rt = &self.runtime;
        let mut s =
            String::from("// @generated by caustic-gpu-build from src/**/*.cu; do not edit.\n\n");
        s += "/// This crate's CUDA headers (`src/**/*.cuh` and the run-time generated\n";
        s += "/// ones), by include name.\n";
        writeln!(
            s,
            "pub static HEADERS: {rt}::HeaderSet = {rt}::HeaderSet {{"
        )
        .unwrap();
        s += "    files: &[\n";
        for header in headers {
            let name = header.rsplit('/').next().unwrap();
            writeln!(
                s,
                "        (\"{name}\", include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/src/{header}\"))),"
            )
            .unwrap();
        }
        s += "    ],\n    generated: &[\n";
        for (name, function) in &self.generated_headers {
            writeln!(s, "        (\"{name}\", {function}),").unwrap();
        }
        s += "    ],\n};\n\n";
        let mut sets = vec![format!("&{rt}::RUNTIME_HEADERS")];
        if rt == "crate" {
            sets.clear();
        }
        sets.extend(self.header_dependencies.iter().map(|d| format!("&{d}")));
        sets.push("&HEADERS".into());
        writeln!(
            s,
            "/// Every header set this crate's modules see, searched in order.\nstatic HEADER_SETS: [&{rt}::HeaderSet; {}] = [{}];\n",
            sets.len(),
            sets.join(", ")
        )
        .unwrap();
        s += "/// Every kernel module of this crate, in path order.\n";
        writeln!(
            s,
            "pub static MODULES: [&{rt}::Module; {}] = [",
            modules.len()
        )
        .unwrap();
        for module in modules {
            writeln!(s, "    &{}::MODULE,", module.rust_name()).unwrap();
        }
        s += "];\n";
        for module in modules {
            self.emit_module(&mut s, crate_name, module)?;
        }
        Ok(s)
    }

    fn emit_module(
        &self,
        s: &mut String,
        crate_name: &str,
        module: &SourceModule,
    ) -> Result<(), String> {
        let rt = &self.runtime;
        let path = &module.relative;
        writeln!(
            s,
            "\n/// The kernels of `src/{path}`.\npub mod {} {{",
            module.rust_name()
        )
        .unwrap();
        writeln!(
            s,
            "    #[allow(unused_imports)]\n    use {rt}::{{Kernel, Ptr, PtrMut}};"
        )
        .unwrap();
        let names: Vec<String> = module
            .kernels
            .iter()
            .map(|k| format!("\"{}\"", k.name))
            .collect();
        writeln!(
            s,
            "    /// `src/{path}`, embedded.\n    pub static MODULE: {rt}::Module = {rt}::Module {{\n        name: \"{crate_name}/src/{path}\",\n        source: include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/src/{path}\")),\n        headers: &super::HEADER_SETS,\n        kernels: &[{}],\n    }};",
            names.join(", ")
        )
        .unwrap();
        for (index, kernel) in module.kernels.iter().enumerate() {
            let types = kernel
                .params
                .iter()
                .map(|p| self.param_type(p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("src/{path}: kernel `{}`: {e}", kernel.name))?;
            let signature = match types.len() {
                1 => format!("({},)", types[0]),
                _ => format!("({})", types.join(", ")),
            };
            writeln!(
                s,
                "    /// `{}({})`\n    pub const {}: Kernel<{signature}> = Kernel::new(&MODULE, {index}, \"{}\");",
                kernel.name,
                kernel.params.iter().map(Param::cuda).collect::<Vec<_>>().join(", "),
                kernel.name.to_ascii_uppercase(),
                kernel.name
            )
            .unwrap();
        }
        s.push_str("}\n");
        Ok(())
    }
}

struct SourceModule {
    /// Path below `src/`, with `/`.
    relative: String,
    kernels: Vec<KernelSignature>,
}

impl SourceModule {
    /// `points/kdtree/build.cu` -> `points_kdtree_build`.
    fn rust_name(&self) -> String {
        self.relative
            .trim_end_matches(".cu")
            .replace(['/', '-', '.'], "_")
    }
}

/// One `extern "C" __global__` function.
#[derive(Debug, PartialEq)]
struct KernelSignature {
    name: String,
    params: Vec<Param>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pointer {
    No,
    Const,
    Mut,
}

#[derive(Debug, PartialEq)]
struct Param {
    ty: String,
    pointer: Pointer,
    name: String,
}

impl Param {
    fn cuda(&self) -> String {
        match self.pointer {
            Pointer::No => format!("{} {}", self.ty, self.name),
            Pointer::Const => format!("const {}* {}", self.ty, self.name),
            Pointer::Mut => format!("{}* {}", self.ty, self.name),
        }
    }
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("readable dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

const MARKER: &str = "extern \"C\" __global__ void";

/// The `extern "C" __global__ void` functions of a CUDA source, in source
/// order, with their parameter lists. `__launch_bounds__(...)` may stand
/// between `void` and the name. Lines that are comments or preprocessor
/// directives are not searched.
fn parse_kernels(source: &str) -> Result<Vec<KernelSignature>, String> {
    let code = strip_comments_and_directives(source);
    let mut kernels = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find(MARKER) {
        rest = rest[at + MARKER.len()..].trim_start();
        if let Some(after) = rest.strip_prefix("__launch_bounds__") {
            let close = matching_paren(after).ok_or("unclosed __launch_bounds__(")?;
            rest = after[close + 1..].trim_start();
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            return Err(format!("a kernel without a name after `{MARKER}`"));
        }
        let name = rest[..end].to_owned();
        let after_name = rest[end..].trim_start();
        let close = after_name
            .starts_with('(')
            .then(|| matching_paren(after_name))
            .flatten()
            .ok_or_else(|| format!("kernel `{name}`: no parameter list"))?;
        let params =
            parse_params(&after_name[1..close]).map_err(|e| format!("kernel `{name}`: {e}"))?;
        kernels.push(KernelSignature { name, params });
        rest = &after_name[close..];
    }
    Ok(kernels)
}

/// Index of the `)` closing the `(` that `text` starts with (after spaces).
fn matching_paren(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn strip_comments_and_directives(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut in_block = false;
    for line in source.lines() {
        let mut line = line;
        let mut kept = String::new();
        loop {
            if in_block {
                match line.find("*/") {
                    Some(end) => {
                        in_block = false;
                        line = &line[end + 2..];
                    }
                    None => break,
                }
            } else {
                let block = line.find("/*");
                let comment = line.find("//");
                match (block, comment) {
                    (Some(b), c) if c.is_none_or(|c| b < c) => {
                        kept.push_str(&line[..b]);
                        in_block = true;
                        line = &line[b + 2..];
                    }
                    (_, Some(c)) => {
                        kept.push_str(&line[..c]);
                        break;
                    }
                    _ => {
                        kept.push_str(line);
                        break;
                    }
                }
            }
        }
        if !kept.trim_start().starts_with('#') {
            out.push_str(&kept);
        }
        out.push('\n');
    }
    out
}

fn parse_params(list: &str) -> Result<Vec<Param>, String> {
    let list = list.trim();
    if list.is_empty() || list == "void" {
        return Ok(Vec::new());
    }
    list.split(',').map(parse_param).collect()
}

/// `const T* name`, `T* name` or `T name`, with single spaces or none
/// around `*`; `__restrict__` and a `const` after the `*` are allowed.
fn parse_param(text: &str) -> Result<Param, String> {
    let words = text
        .replace('*', " * ")
        .replace("__restrict__", " ")
        .split_whitespace()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let (name, mut head) = words
        .split_last()
        .map(|(n, h)| (n.clone(), h.to_vec()))
        .ok_or_else(|| format!("empty parameter in `{text}`"))?;
    let stars = head.iter().filter(|w| *w == "*").count();
    if stars > 1 {
        return Err(format!("`{text}`: pointers to pointers are not supported"));
    }
    // A `const` after the `*` makes the pointer itself const: irrelevant here.
    if let Some(star) = head.iter().position(|w| w == "*") {
        head.truncate(star + 1);
    }
    let leading_const = head.first().is_some_and(|w| w == "const");
    let ty: Vec<&str> = head
        .iter()
        .map(String::as_str)
        .filter(|w| *w != "const" && *w != "*")
        .collect();
    if ty.is_empty() {
        return Err(format!("`{text}`: no type"));
    }
    let pointer = match (stars, leading_const) {
        (0, _) => Pointer::No,
        (_, true) => Pointer::Const,
        (_, false) => Pointer::Mut,
    };
    Ok(Param {
        ty: ty.join(" "),
        pointer,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(ty: &str, pointer: Pointer, name: &str) -> Param {
        Param {
            ty: ty.into(),
            pointer,
            name: name.into(),
        }
    }

    #[test]
    fn parses_launch_bounds_pointers_and_comments() {
        let source = "// extern \"C\" __global__ void commented(u32 a)\n\
            #define X extern \"C\" __global__ void in_a_macro(u32 a)\n\
            extern \"C\" __global__ void __launch_bounds__(SORT_THREADS, 8)\n\
            radix(const u32* keys, u64 n, u32 *hist, /* note */ float4* out, unsigned long long m) {}\n\
            extern \"C\" __global__ void empty() {}";
        let kernels = parse_kernels(source).unwrap();
        assert_eq!(kernels.len(), 2);
        assert_eq!(kernels[0].name, "radix");
        assert_eq!(
            kernels[0].params,
            vec![
                param("u32", Pointer::Const, "keys"),
                param("u64", Pointer::No, "n"),
                param("u32", Pointer::Mut, "hist"),
                param("float4", Pointer::Mut, "out"),
                param("unsigned long long", Pointer::No, "m"),
            ]
        );
        assert!(kernels[1].params.is_empty());
    }

    #[test]
    fn unknown_types_and_structs_by_value_are_errors() {
        let kernels = Kernels::new();
        let by_value = param("Photon", Pointer::No, "p");
        assert!(
            kernels
                .param_type(&by_value)
                .unwrap_err()
                .contains("by value")
        );
        let unknown = param("Photon", Pointer::Const, "p");
        assert!(
            kernels
                .param_type(&unknown)
                .unwrap_err()
                .contains("no Rust twin")
        );
        let declared = Kernels::new().ty("Photon", "crate::Photon");
        assert_eq!(declared.param_type(&unknown).unwrap(), "Ptr<crate::Photon>");
        let scalar = param("float", Pointer::No, "x");
        assert_eq!(kernels.param_type(&scalar).unwrap(), "f32");
    }

    #[test]
    fn pointer_to_pointer_is_rejected() {
        assert!(parse_param("u32** x").is_err());
        assert_eq!(
            parse_param("const u32* const x").unwrap(),
            param("u32", Pointer::Const, "x")
        );
    }
}
