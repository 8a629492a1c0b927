//! Reading the `.txnindex` files of a partition's segments: the aborted transactions a
//! `read_committed` reader skips.

use super::*;

impl Log {
    /// Aborted transactions from the `.txnindex` files whose range overlaps `[from, to)`
    /// (`lastOffset >= from` and `firstOffset < to`). A trailing partial entry is ignored.
    pub fn aborted_transactions(&self, from: Offset, to: Offset) -> Result<Vec<AbortedTxn>> {
        let mut out = Vec::new();
        for seg in self.segments_from(from) {
            let path = seg.file_path(".txnindex");
            let bytes = match crate::storage::open::read_regular(&path) {
                Ok(b) => b,
                Err(e) if crate::storage::open::is_not_found(&e) => continue,
                Err(e) => return Err(e),
            };
            for (at, entry) in txn_index::entries(&bytes) {
                // Only the version's high byte is checked (versions 1..=255 pass, negative ones
                // do not), as this reader always did.
                if entry.version.to_be_bytes()[0] > 0 {
                    return Err(Error::corrupt(&path, at, "unknown txn index entry version"));
                }
                if entry.last_offset >= from && entry.first_offset < to {
                    out.push(AbortedTxn {
                        producer_id: entry.producer_id,
                        first_offset: entry.first_offset,
                        last_offset: entry.last_offset,
                        last_stable_offset: entry.last_stable_offset,
                    });
                }
            }
        }
        Ok(out)
    }
}
