# The Rust crates of bindings/rust, through cargo: skipped (and reported so)
# when cargo is not installed.
cm_script_test(rust_crates rust_crates.sh)
set_tests_properties(rust_crates PROPERTIES SKIP_RETURN_CODE 77)
