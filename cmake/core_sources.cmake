# The allocator core's C sources, relative to the project root (the
# generated size-class table comes on top). CMakeLists.txt builds them, and
# bindings/rust/cagemalloc-sys/build.rs reads this same list, one file a line.
set(CM_CORE_SOURCE_FILES
  src/os.c
  src/init.c
  src/options.c
  src/error.c
  src/pagemap.c
  src/descriptor.c
  src/arena.c
  src/pool.c
  src/large.c
  src/heap_records.c
  src/heap.c
  src/heap_alloc.c
  src/remote.c
  src/heap_visit.c
  src/cage.c
  src/alloc.c
  src/double_free.c
  src/runs.c
  src/klass.c
  src/code.c
  src/stats.c
  src/reservation.c
)
