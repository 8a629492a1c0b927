//! Kafka's default partitioner: which partition a record written to a topic-level `append`
//! lands in.
//!
//! * A record with a key (an empty key is a key) goes to
//!   `toPositive(murmur2(key)) % partitions`, exactly as the Java producer's
//!   `BuiltInPartitioner.partitionForKey` and librdkafka's `murmur2_random` partitioner (the
//!   Java-compatible one) choose, so a key lands in the partition a Java producer would choose
//!   for the same number of partitions. [`murmur2`] is `org.apache.kafka.common.utils.Utils.murmur2`
//!   with its Java `int` arithmetic (wrapping 32-bit multiplication, `>>>` shifts) and seed
//!   `0x9747b28c`; [`to_positive`] is `Utils.toPositive` (`x & 0x7fffffff`, not `abs`, which
//!   would leave `Integer.MIN_VALUE` negative).
//! * Records without a key are spread like the sticky partitioner spreads batches: all keyless
//!   records of one `write()` form one batch in one partition, and successive writes to the
//!   topic rotate over the partitions ([`KeylessRotation`]), so `n` writes fill `n` partitions
//!   evenly instead of scattering every record.

use std::sync::atomic::{AtomicU64, Ordering};

/// Seed of Kafka's `Utils.murmur2`.
pub const MURMUR2_SEED: u32 = 0x9747_b28c;
/// Mixing constant `m` of MurmurHash2.
const M: u32 = 0x5bd1_e995;
/// Mixing shift `r` of MurmurHash2.
const R: u32 = 24;

/// Kafka's `Utils.murmur2(byte[])`: 32-bit MurmurHash2 with seed `0x9747b28c`, reading the input
/// as little-endian 4-byte words, returned as Java's signed `int`.
pub fn murmur2(data: &[u8]) -> i32 {
    // Java: `int h = seed ^ length` (the length as an int; keys are far below 2 GiB, and a
    // longer slice wraps exactly as Java's int conversion of a long would).
    let mut h = MURMUR2_SEED ^ (data.len() as u32);
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    // The last 1-3 bytes, folded in the order of Java's fall-through switch.
    let tail = words.remainder();
    if let Some(&b) = tail.get(2) {
        h ^= u32::from(b) << 16;
    }
    if let Some(&b) = tail.get(1) {
        h ^= u32::from(b) << 8;
    }
    if let Some(&b) = tail.first() {
        h ^= u32::from(b);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (`Integer.MIN_VALUE` becomes 0).
pub fn to_positive(x: i32) -> u32 {
    (x & 0x7fff_ffff) as u32
}

/// The partition Kafka's default partitioner chooses for a record with `key` in a topic of
/// `partitions` partitions: `toPositive(murmur2(key)) % partitions`. `None` when the topic has no
/// partitions.
pub fn partition_for_key(key: &[u8], partitions: u32) -> Option<u32> {
    to_positive(murmur2(key)).checked_rem(partitions)
}

/// Rotation of keyless writes over a topic's partitions: each call to
/// [`KeylessRotation::next`] answers the partition after the previous answer (modulo the
/// current number of partitions), starting at partition 0. Shared by every handle of a topic,
/// so `echo a >> append; echo b >> append` writes to two partitions.
#[derive(Debug, Default)]
pub struct KeylessRotation {
    /// Writes that took a partition so far (wrapping).
    taken: AtomicU64,
}

impl KeylessRotation {
    /// A rotation starting at partition 0.
    pub fn new() -> KeylessRotation {
        KeylessRotation::default()
    }

    /// The partition for the next keyless write; `None` when the topic has no partitions.
    pub fn next(&self, partitions: u32) -> Option<u32> {
        if partitions == 0 {
            return None;
        }
        let n = self.taken.fetch_add(1, Ordering::Relaxed);
        u32::try_from(n % u64::from(partitions)).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `UtilsTest.testMurmur2` in Apache Kafka's clients module.
    const KAFKA_VECTORS: [(&[u8], i32); 6] = [
        (b"21", -973_932_308),
        (b"foobar", -790_332_482),
        (b"a-little-bit-long-string", -985_981_536),
        (b"a-little-bit-longer-string", -1_486_304_829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
        (b"abc", 479_470_107),
    ];

    #[test]
    fn murmur2_matches_kafka_utils_test_vectors() {
        for (key, want) in KAFKA_VECTORS {
            assert_eq!(murmur2(key), want, "murmur2({:?})", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn murmur2_covers_every_tail_length() {
        // Remainders 0..=3 and the empty key, from kafka-python's `murmur2` (which returns the
        // unsigned 32 bits of Java's int).
        let cases: [(&[u8], u32); 6] = [
            (b"", 275_646_681),
            (b"a", 2_731_586_172),
            (b"ab", 316_155_434),
            (b"abcd", 2_971_317_748),
            (b"abcde", 461_995_741),
            (b"foobar", 3_504_634_814),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key) as u32, want, "murmur2({key:?})");
        }
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), 0x7fff_ffff);
        assert_eq!(to_positive(-790_332_482), 1_357_151_166);
        assert_eq!(to_positive(42), 42);
    }

    #[test]
    fn keyed_partition_is_positive_hash_modulo_count() {
        assert_eq!(partition_for_key(b"foobar", 10), Some(1_357_151_166 % 10));
        assert_eq!(partition_for_key(b"foobar", 1), Some(0));
        assert_eq!(partition_for_key(b"foobar", 0), None);
    }

    #[test]
    fn keyless_writes_rotate_over_all_partitions() {
        let rotation = KeylessRotation::new();
        let got: Vec<_> = (0..7).map(|_| rotation.next(3).unwrap()).collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(rotation.next(0), None);
    }
}
