// Builds the cagemalloc core as a static library with the flags CMake uses
// for it (CMakeLists.txt, CM_LIB_FLAGS): hidden visibility, initial-exec
// TLS, no builtins, hardening on. The sources are the list in
// c/cmake/core_sources.cmake, the one CMake reads, plus the size-class table
// that c/tools/gen_size_classes.c generates, as in the CMake build. c/ holds
// symlinks to the project's include/, src/, tools/ and cmake/ (cargo package
// copies their files into the crate).
//
// CAGEMALLOC_CAGE_SHIFT (1, 2 or 3; default 1) sets the cage's compression
// shift, as the CMake option of that name does; OUT_DIR/cage.rs carries it to
// the Rust side, with the name of the base variable that encodes it.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let c = manifest.join("c");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());

    let shift = env::var("CAGEMALLOC_CAGE_SHIFT").unwrap_or_else(|_| "1".into());
    if !matches!(shift.as_str(), "1" | "2" | "3") {
        panic!("CAGEMALLOC_CAGE_SHIFT must be 1, 2 or 3 (a 4, 8 or 16 GiB cage), not {shift:?}");
    }
    println!("cargo:rerun-if-env-changed=CAGEMALLOC_CAGE_SHIFT");

    let target = env::var("TARGET").unwrap();
    if !target.starts_with("x86_64-") || !target.contains("-linux-") {
        panic!("cagemalloc supports x86-64 Linux only (target {target})");
    }

    generate_size_class_table(&c, &out);
    let sources = core_sources(&c);

    let mut build = cc::Build::new();
    build
        .files(sources.iter().map(|s| c.join(s)))
        .file(out.join("size_class_table.c"))
        .include(c.join("include"))
        .include(c.join("src"))
        .include(&out)
        .define("CAGEMALLOC_CAGE_SHIFT", shift.as_str())
        .define("NDEBUG", None)
        // the allocator is always optimized, in debug builds of the program too
        .opt_level(2)
        .pic(true)
        .warnings(true);
    for flag in [
        "-std=gnu11",
        "-fvisibility=hidden",
        "-fno-plt",
        "-fno-semantic-interposition",
        "-ftls-model=initial-exec",
        "-fno-builtin",
        "-fno-stack-protector",
        "-fno-strict-aliasing",
    ] {
        build.flag(flag);
    }
    build.compile("cagemalloc");
    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:include={}", c.join("include").display());
    println!("cargo:cage_shift={shift}");

    fs::write(
        out.join("cage.rs"),
        format!(
            "/// The cage's compression shift S this library was built with.\n\
             pub const CAGE_SHIFT: u32 = {shift};\n\
             extern \"C\" {{\n\
             \x20   /// The cage's start with its low 31 + S bits set (only those bits until the\n\
             \x20   /// cage exists); written once, when the cage is made.\n\
             \x20   #[link_name = \"cm_cage_base_shift{shift}\"]\n\
             \x20   pub static cm_cage_base: core::sync::atomic::AtomicUsize;\n\
             }}\n"
        ),
    )
    .unwrap();
}

/// The file names listed in core_sources.cmake: one `src/*.c` a line.
fn core_sources(c: &Path) -> Vec<String> {
    let list = c.join("cmake/core_sources.cmake");
    println!("cargo:rerun-if-changed={}", list.display());
    let text = fs::read_to_string(&list).unwrap_or_else(|e| panic!("{}: {e}", list.display()));
    let sources: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("src/") && l.ends_with(".c"))
        .map(String::from)
        .collect();
    assert!(
        !sources.is_empty(),
        "no sources listed in {}",
        list.display()
    );
    for s in &sources {
        println!("cargo:rerun-if-changed={}", c.join(s).display());
    }
    for dir in ["src", "include"] {
        println!("cargo:rerun-if-changed={}", c.join(dir).display());
    }
    sources
}

/// Compiles the table generator for the build machine and runs it, as the
/// CMake build does.
fn generate_size_class_table(c: &Path, out: &Path) {
    let generator_source = c.join("tools/gen_size_classes.c");
    println!("cargo:rerun-if-changed={}", generator_source.display());
    let host = env::var("HOST").unwrap();
    let compiler = cc::Build::new()
        .host(&host)
        .target(&host)
        .opt_level(0)
        .get_compiler();
    let generator = out.join("gen_size_classes");
    let status = compiler
        .to_command()
        .arg(&generator_source)
        .arg("-o")
        .arg(&generator)
        .status()
        .expect("running the C compiler");
    assert!(
        status.success(),
        "compiling {} failed",
        generator_source.display()
    );
    let status = Command::new(&generator)
        .arg(out.join("size_class_table.h"))
        .arg(out.join("size_class_table.c"))
        .status()
        .expect("running gen_size_classes");
    assert!(status.success(), "gen_size_classes failed");
}
