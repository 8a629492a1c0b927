//! TEMPORARY: replaced by the jbod branch's version.
pub fn next_log_dirs(dirs: &[(&str, usize)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..dirs.len()).collect();
    order.sort_by_key(|&i| dirs[i].1);
    order
}
