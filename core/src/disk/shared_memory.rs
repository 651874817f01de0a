//! SharedGlobalMemory: the data node's shared memory budget (config parameter
//! `SharedGlobalMemory`, default 128M) from which the undo log buffer
//! (`UNDO_BUFFER_SIZE`) and other disk-data buffers are taken.
//!
//! [`SharedGlobalMemory::try_reserve`] hands out a [`Reservation`] that returns its
//! bytes when dropped; a request that does not fit fails with NDB error 1504
//! ("Out of logbuffer memory") and reserves nothing.
//!
//! Invariant: `used_bytes() <= total_bytes()` at all times; the sum of the live
//! reservations equals `used_bytes()`. One internal mutex, no other lock is taken while
//! it is held.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Result, codes};

/// NDB's default `SharedGlobalMemory` (128M).
pub const DEFAULT_SHARED_GLOBAL_MEMORY_BYTES: u64 = 128 * 1024 * 1024;

#[derive(Debug)]
struct Budget {
    total_bytes: u64,
    used_bytes: Mutex<u64>,
}

/// The shared memory budget. Cloning shares the same budget.
#[derive(Clone, Debug)]
pub struct SharedGlobalMemory {
    budget: Arc<Budget>,
}

impl Default for SharedGlobalMemory {
    fn default() -> SharedGlobalMemory {
        SharedGlobalMemory::new(DEFAULT_SHARED_GLOBAL_MEMORY_BYTES)
    }
}

impl SharedGlobalMemory {
    /// A budget of `total_bytes`.
    pub fn new(total_bytes: u64) -> SharedGlobalMemory {
        SharedGlobalMemory {
            budget: Arc::new(Budget {
                total_bytes,
                used_bytes: Mutex::new(0),
            }),
        }
    }

    /// Reserve `bytes`; error 1504 when the budget does not have them.
    pub fn try_reserve(&self, bytes: u64) -> Result<Reservation> {
        let mut used = self.budget.used_bytes.lock();
        let free = self.budget.total_bytes - *used;
        if bytes > free {
            return Err(codes::out_of_logbuffer_memory(format_args!(
                "{bytes} bytes requested, {free} of {} bytes of SharedGlobalMemory free",
                self.budget.total_bytes
            )));
        }
        *used += bytes;
        assert!(*used <= self.budget.total_bytes);
        Ok(Reservation {
            budget: self.budget.clone(),
            bytes,
        })
    }

    pub fn total_bytes(&self) -> u64 {
        self.budget.total_bytes
    }

    pub fn used_bytes(&self) -> u64 {
        *self.budget.used_bytes.lock()
    }
}

/// Bytes taken from a [`SharedGlobalMemory`]; given back on drop.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    bytes: u64,
}

impl Reservation {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut used = self.budget.used_bytes.lock();
        assert!(
            *used >= self.bytes,
            "reservation larger than the used bytes"
        );
        *used -= self.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_release_and_1504() {
        let m = SharedGlobalMemory::new(1000);
        let a = m.try_reserve(600).unwrap();
        assert_eq!(m.used_bytes(), 600);
        let e = m.try_reserve(500).unwrap_err();
        assert_eq!(e.code, 1504);
        assert_eq!(m.used_bytes(), 600, "a failed request reserves nothing");
        let b = m.clone().try_reserve(400).unwrap();
        assert_eq!(m.used_bytes(), 1000);
        drop(a);
        assert_eq!(m.used_bytes(), 400);
        assert_eq!(b.bytes(), 400);
        drop(b);
        assert_eq!(m.used_bytes(), 0);
        assert_eq!(m.total_bytes(), 1000);
    }
}
