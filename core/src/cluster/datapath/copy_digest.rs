//! Digests of a kept table's unchanged rows, for a node restart that copies only the
//! rows changed since the joining node's checkpoint (`copy_delta`, `copy_out`).
//!
//! The source scans the table and sends the rows changed since the offered checkpoint
//! whole; the rows unchanged since (ROW_GCI at or below it) it folds into a
//! [`Digest`]: the row key's 128-bit XXH3 hash ([`key_hash`]) picks a bucket (its high
//! 64 bits mod a power of two), and each bucket keeps the number of rows and the XOR
//! of their hashes. The joining node folds the rows it restored the same way (less
//! those that came whole; `copy_delta`) and compares bucket by bucket: where both
//! agree it holds exactly the rows the source kept unchanged (two different sets of
//! equal size give the same XOR with probability 2⁻¹²⁸); where they differ it asks for
//! those buckets' keys (`CopyRecheck`) and deletes its rows there that did not come.
//! Before this, every unchanged row's key went over the wire and into a hash set at
//! the joining node.
//!
//! A bucket differs where a row was deleted at the source while the joining node was
//! down (what the comparison is for), and where a transaction deleted an unchanged row
//! before the source's scan reached it (harmless: that bucket's keys are just sent).
//!
//! Limits: at most [`MAX_BUCKETS`] buckets, [`DIGEST_CHUNK`] per message (20 bytes
//! each on the wire).

use super::copy::RowKeyEncoder;
use crate::error::{Result, codes};
use crate::schema::Value;

/// Rows per bucket the source aims at (a differing bucket costs that many keys).
pub const ROWS_PER_BUCKET: u64 = 16;
/// Fewest buckets of a digest.
pub const MIN_BUCKETS: u32 = 64;
/// Most buckets of a digest (20 MiB in memory, 16 messages).
pub const MAX_BUCKETS: u32 = 1 << 20;
/// The joining node folds its restored rows into this many times the buckets its
/// own row count calls for, so that the source's digest (sized by the source's row
/// count) is a fold of it unless the source holds many times more rows.
pub const RESTORED_BUCKETS_FACTOR: u32 = 4;
/// Buckets per `CopyDigest` message (1.25 MiB on the wire).
pub const DIGEST_CHUNK: usize = 1 << 16;

/// The 128-bit hash of a row key ([`super::DataPath::row_key`] bytes).
pub(crate) fn key_hash(row_key: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(row_key)
}

/// [`key_hash`] of the row keys of many keys of one table.
pub(crate) struct KeyHasher<'a>(RowKeyEncoder<'a>);

impl<'a> KeyHasher<'a> {
    pub(crate) fn new(rt: &'a crate::api::TableRuntime, database: &str) -> KeyHasher<'a> {
        KeyHasher(RowKeyEncoder::new(rt, database))
    }

    pub(crate) fn hash(&mut self, key: &[Value]) -> Result<u128> {
        self.0.encode(key).map(key_hash)
    }
}

/// The bucket count for a table of about `rows` rows: a power of two in
/// `MIN_BUCKETS..=MAX_BUCKETS`.
pub fn bucket_count(rows: u64) -> u32 {
    let want = (rows / ROWS_PER_BUCKET).clamp(u64::from(MIN_BUCKETS), u64::from(MAX_BUCKETS));
    // A power of two at most MAX_BUCKETS (itself one).
    want.next_power_of_two() as u32
}

/// The bucket of a key hash among `buckets` (a power of two).
pub fn bucket_of(hash: u128, buckets: u32) -> u32 {
    debug_assert!(buckets.is_power_of_two());
    ((hash >> 64) as u64 & u64::from(buckets - 1)) as u32
}

/// Per bucket: rows, and the XOR of their key hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    counts: Vec<u32>,
    xors: Vec<u128>,
}

impl Digest {
    /// An empty digest of `buckets` buckets (a power of two, at most [`MAX_BUCKETS`]).
    pub fn new(buckets: u32) -> Result<Digest> {
        if !buckets.is_power_of_two() || buckets > MAX_BUCKETS {
            return Err(codes::internal(format!(
                "copy digest: {buckets} buckets (a power of two up to {MAX_BUCKETS})"
            )));
        }
        Ok(Digest {
            counts: vec![0; buckets as usize],
            xors: vec![0; buckets as usize],
        })
    }

    pub fn buckets(&self) -> u32 {
        self.counts.len() as u32
    }

    pub fn add(&mut self, hash: u128) {
        let b = bucket_of(hash, self.buckets()) as usize;
        self.counts[b] = self.counts[b].wrapping_add(1);
        self.xors[b] ^= hash;
    }

    /// Takes out a row [`Digest::add`] put in.
    pub fn remove(&mut self, hash: u128) {
        let b = bucket_of(hash, self.buckets()) as usize;
        self.counts[b] = self.counts[b].wrapping_sub(1);
        self.xors[b] ^= hash;
    }

    /// Rows folded in.
    pub fn rows(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).sum()
    }

    /// The same rows in `buckets` buckets (a power of two, at most this digest's): a
    /// bucket's rows are those of the buckets that agree with it in its low bits.
    pub fn folded_to(&self, buckets: u32) -> Result<Digest> {
        if buckets > self.buckets() {
            return Err(codes::internal(format!(
                "copy digest: {} buckets cannot make {buckets}",
                self.buckets()
            )));
        }
        let mut out = Digest::new(buckets)?;
        let mask = buckets as usize - 1;
        for (i, (&c, &x)) in self.counts.iter().zip(&self.xors).enumerate() {
            out.counts[i & mask] = out.counts[i & mask].wrapping_add(c);
            out.xors[i & mask] ^= x;
        }
        Ok(out)
    }

    /// The `CopyDigest` parts: (first bucket, its entries), [`DIGEST_CHUNK`] each.
    pub fn chunks(&self) -> impl Iterator<Item = (u32, Vec<(u32, u128)>)> + '_ {
        self.counts
            .chunks(DIGEST_CHUNK)
            .zip(self.xors.chunks(DIGEST_CHUNK))
            .enumerate()
            .map(|(i, (c, x))| {
                (
                    (i * DIGEST_CHUNK) as u32,
                    c.iter().copied().zip(x.iter().copied()).collect(),
                )
            })
    }

    /// Sets buckets `first..` from a `CopyDigest` part.
    pub fn put(&mut self, first: u32, entries: &[(u32, u128)]) -> Result<()> {
        let from = first as usize;
        let to = from + entries.len();
        if to > self.counts.len() {
            return Err(codes::internal(format!(
                "copy digest: buckets {from}..{to} of {}",
                self.counts.len()
            )));
        }
        for (i, &(c, x)) in entries.iter().enumerate() {
            self.counts[from + i] = c;
            self.xors[from + i] = x;
        }
        Ok(())
    }

    /// The buckets where the two digests (of the same size) differ, ascending.
    pub fn differing(&self, other: &Digest) -> Result<Vec<u32>> {
        if self.buckets() != other.buckets() {
            return Err(codes::internal(format!(
                "copy digest: {} buckets against {}",
                self.buckets(),
                other.buckets()
            )));
        }
        Ok((0..self.counts.len())
            .filter(|&i| self.counts[i] != other.counts[i] || self.xors[i] != other.xors[i])
            .map(|i| i as u32)
            .collect())
    }
}

/// A digest arriving in parts: complete once every bucket came, each once.
pub struct DigestIn {
    pub digest: Digest,
    received: u32,
}

impl DigestIn {
    pub fn new(buckets: u32) -> Result<DigestIn> {
        Ok(DigestIn {
            digest: Digest::new(buckets)?,
            received: 0,
        })
    }

    /// A part; Ok(true) once the digest is complete. Parts come in order, so a part
    /// that does not start where the previous one ended is a broken source.
    pub fn put(&mut self, buckets: u32, first: u32, entries: &[(u32, u128)]) -> Result<bool> {
        if buckets != self.digest.buckets() || first != self.received {
            return Err(codes::internal(format!(
                "copy digest: part at bucket {first} of {buckets}, expected {} of {}",
                self.received,
                self.digest.buckets()
            )));
        }
        self.digest.put(first, entries)?;
        self.received += entries.len() as u32;
        Ok(self.received == self.digest.buckets())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(i: u64) -> u128 {
        key_hash(&i.to_le_bytes())
    }

    #[test]
    fn bucket_counts_are_bounded_powers_of_two() {
        assert_eq!(bucket_count(0), MIN_BUCKETS);
        assert_eq!(bucket_count(16 * 64), 64);
        assert_eq!(bucket_count(16 * 65), 128);
        assert_eq!(bucket_count(1_000_000), 65_536);
        assert_eq!(bucket_count(u64::MAX), MAX_BUCKETS);
        assert!(Digest::new(100).is_err());
        assert!(Digest::new(MAX_BUCKETS * 2).is_err());
    }

    /// The joining node's rows against the source's: a row deleted at the source, a
    /// row the joining node lacks, and a swap of one row for another each make their
    /// bucket (and only it) differ; the same rows in any order agree.
    #[test]
    fn digests_differ_exactly_where_the_rows_do() {
        let buckets = bucket_count(10_000);
        let mut source = Digest::new(buckets).expect("digest");
        let mut joiner = Digest::new(buckets).expect("digest");
        for i in 0..10_000 {
            source.add(h(i));
        }
        for i in (0..10_000).rev() {
            joiner.add(h(i));
        }
        assert_eq!(source, joiner);
        assert_eq!(source.rows(), 10_000);
        // Deleted at the source while the joining node was down.
        let mut deleted = Digest::new(buckets).expect("digest");
        for i in (0..10_000).filter(|&i| i != 77) {
            deleted.add(h(i));
        }
        assert_eq!(
            deleted.differing(&joiner).expect("same size"),
            vec![bucket_of(h(77), buckets)]
        );
        // Same count in the bucket, another row: the XOR tells them apart.
        let b5 = bucket_of(h(5), buckets);
        let other = (10_000..)
            .find(|&j| bucket_of(h(j), buckets) == b5)
            .expect("a row in row 5's bucket");
        let mut swapped = Digest::new(buckets).expect("digest");
        for i in (0..10_000).filter(|&i| i != 5).chain([other]) {
            swapped.add(h(i));
        }
        assert_eq!(swapped.rows(), joiner.rows());
        assert_eq!(joiner.differing(&swapped).expect("same size"), vec![b5]);
        assert!(joiner.differing(&Digest::new(64).expect("digest")).is_err());
    }

    /// A digest folded to fewer buckets is the digest those rows make there; a row
    /// taken out is as if never added.
    #[test]
    fn digests_fold_to_fewer_buckets_and_rows_come_out() {
        let mut fine = Digest::new(1024).expect("digest");
        let mut coarse = Digest::new(64).expect("digest");
        for i in 0..5_000 {
            fine.add(h(i));
            coarse.add(h(i));
        }
        assert_eq!(fine.folded_to(64).expect("fold"), coarse);
        assert_eq!(fine.folded_to(1024).expect("fold"), fine);
        assert!(coarse.folded_to(128).is_err());
        fine.add(h(99_999));
        fine.remove(h(99_999));
        fine.remove(h(7));
        coarse.remove(h(7));
        assert_eq!(fine.folded_to(64).expect("fold"), coarse);
        assert_eq!(coarse.rows(), 4_999);
    }

    /// Parts put together give the digest back; parts out of order, of another size or
    /// past the end are refused.
    #[test]
    fn a_digest_in_parts_comes_together() {
        let mut d = Digest::new(1 << 18).expect("digest");
        for i in 0..100_000 {
            d.add(h(i));
        }
        let parts: Vec<(u32, Vec<(u32, u128)>)> = d.chunks().collect();
        assert_eq!(parts.len(), (1 << 18) / DIGEST_CHUNK);
        let mut got = DigestIn::new(1 << 18).expect("digest");
        for (i, (first, entries)) in parts.iter().enumerate() {
            let complete = got.put(1 << 18, *first, entries).expect("part");
            assert_eq!(complete, i + 1 == parts.len());
        }
        assert_eq!(got.digest, d);
        let mut bad = DigestIn::new(1 << 18).expect("digest");
        assert!(bad.put(1 << 18, parts[1].0, &parts[1].1).is_err());
        assert!(bad.put(1 << 17, 0, &parts[0].1).is_err());
        let mut small = Digest::new(64).expect("digest");
        assert!(small.put(60, &[(1, 1); 5]).is_err());
    }
}
