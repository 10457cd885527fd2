//! The binding layout every module shares with the engine: where `kiln_meta` and `kiln_fault`
//! are bound and which words of `kiln_meta` hold what.

/// Binding index of `kiln_meta` for a kernel with `buffers` buffers (`kiln_fault` is next).
pub fn meta_binding(buffers: usize) -> u32 {
    buffers as u32
}

/// Word index in `kiln_meta` of buffer `k`'s `(offset, len)` pair.
pub fn meta_buffer_word(param_words: usize, k: usize) -> usize {
    param_words + 2 * k
}

/// Word index in `kiln_meta` of the grid (x, y, z).
pub fn meta_grid_word(param_words: usize, buffers: usize) -> usize {
    param_words + 2 * buffers
}

/// Words of `kiln_fault`.
pub const FAULT_WORDS: usize = 6;

/// Largest workgroup the modules support (sizes the no-subgroup exchange array).
pub const MAX_BLOCK: u32 = 1024;
