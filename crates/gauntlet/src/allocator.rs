//! The process's allocator (Linux): jemalloc, set up for a long bench.

/// jemalloc, not glibc's malloc: a bench is one long process in which each stream's small allocations (its read
/// buffers, its token events) are made and freed on whichever runtime worker it runs on at the time, beside seven
/// other streams doing the same. glibc's per-thread arenas fragmented under that: over an hour against the real
/// server the resident memory grew by 6 to 8 % with a flat heap (valgrind massif), and neither `malloc_trim` after
/// each batch nor `M_ARENA_MAX`/`M_MMAP_THRESHOLD` settings stopped it (docs/validation/2026-12-04-memory-and-soak.md).
/// jemalloc keeps each size in its own slabs and hands back unused pages after a delay by itself.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read at its start (`_RJEM_MALLOC_CONF` in the environment still overrides them): one arena
/// (the runtime's few threads seldom contend, and each extra arena holds pages of its own) and freed pages handed
/// back after about a second instead of ten.
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: ConfString = ConfString(c"narenas:1,dirty_decay_ms:1000".as_ptr());

/// A C string's address as the `const char *` jemalloc reads its settings from.
#[repr(transparent)]
struct ConfString(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal, immutable and alive for the whole process.
unsafe impl Sync for ConfString {}
