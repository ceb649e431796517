use super::alloc_size;

/// jemalloc's classes, as `malloc_usable_size` reports them.
#[test]
fn alloc_size_is_jemallocs_size_class() {
    let cases = [
        (0, 0),
        (1, 16),
        (16, 16),
        (17, 32),
        (128, 128),
        (129, 160),
        (160, 160),
        (161, 192),
        (256, 256),
        (257, 320),
        (4096, 4096),
        (4097, 5120),
        (4170, 5120),
        (5121, 6144),
        (7169, 8192),
        (16 << 10, 16 << 10),
        ((16 << 10) + 1, 20 << 10),
        ((1 << 20) + 1, 1280 << 10),
    ];
    for (len, class) in cases {
        assert_eq!(alloc_size(len), class, "{len}");
    }
    // Never less than asked, never more than a quarter over (above 128).
    for len in 129..100_000 {
        let c = alloc_size(len);
        assert!(c >= len && c * 4 <= len * 5 + 3 * 4, "{len} -> {c}");
    }
}
