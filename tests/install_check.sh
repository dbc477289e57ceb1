#!/bin/sh
# install_check: `cmake --install` puts the libraries, the header, the
# pkg-config file and the CMake package where a consumer finds them: a C
# program is built once with pkg-config and once with find_package(cagemalloc),
# linked to the shared and the static library, and run.
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cmake --install "$CM_BUILD" --prefix "$prefix" >/dev/null

cat > "$work/use.c" <<'SRC'
#include <cagemalloc.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    char *p = cm_malloc(100);
    if (!p || cm_usable_size(p) < 100) return 1;
    strcpy(p, "installed");
    puts(p);
    cm_free(p);
    return 0;
}
SRC

libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -n 1)
PKG_CONFIG_PATH="$libdir" cc -o "$work/use_pc" "$work/use.c" $(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs cagemalloc)
LD_LIBRARY_PATH="$(dirname "$libdir")" "$work/use_pc" | grep -qx installed

mkdir "$work/consumer"
cp "$work/use.c" "$work/consumer/"
cat > "$work/consumer/CMakeLists.txt" <<'SRC'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(cagemalloc REQUIRED)
add_executable(use_shared use.c)
target_link_libraries(use_shared cagemalloc::cagemalloc)
add_executable(use_static use.c)
target_link_libraries(use_static cagemalloc::cagemalloc_static)
SRC
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer/build" >/dev/null
"$work/consumer/build/use_shared" | grep -qx installed
"$work/consumer/build/use_static" | grep -qx installed
if nm "$work/consumer/build/use_static" | grep -qE ' T (malloc|free)$'; then
    echo "the static library replaced malloc" >&2
    exit 1
fi
echo "install: pkg-config and find_package consumers build and run"
