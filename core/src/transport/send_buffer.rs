//! One connection's send buffer (NDB's send buffer of a transporter): frames queued by
//! `send` and written to the socket by the connection's writer thread, or by the
//! sender itself when nobody is writing ([`SendBuffer::push_direct`], NDB's direct
//! send).
//!
//! Why: a node's loop must never wait on the network. When it did (writing under the
//! connection's lock), two data nodes sending to each other with full inboxes could
//! each wait for the other's loop: a distributed deadlock. Now `send` only appends to
//! this buffer, and the writer thread drains it. A direct send writes what the socket
//! takes without waiting (a non-blocking write) and leaves the rest to the writer
//! thread: on an idle connection a request or an answer then goes out without waking
//! another thread (two thread hand-offs less per round trip).
//!
//! Limits ([`SendLimits`], from the connection's `[tcp]` section or `[tcp default]`):
//! - **overload** (`OverloadLimit`, 0 meaning 80% of `SendBufferMemory`, as NDB): while
//!   at least that many bytes are unsent the connection counts as overloaded, and data
//!   nodes refuse new work that would answer or forward over it with 1218 "Send
//!   Buffers overloaded in NDB kernel" (temporary; [`SendBuffer::overloaded`]);
//! - **ceiling** (`SendBufferMemory` plus one frame of the largest size): a frame that
//!   would take the unsent bytes above it is not queued and the caller closes the
//!   connection ([`Queued::Full`]): the peer is not reading, and what it had not read
//!   is lost as a broken connection loses it. API nodes instead wait for room
//!   ([`SendBuffer::wait_for_room`]): their senders are application threads, never a
//!   node's loop.
//!
//! Invariants: `unsent = pending.len() + writing` never exceeds the ceiling; bytes are
//! written in the order they were queued (one writer at a time, `busy`: the writer
//! thread or a direct sender; what a direct send could not write goes back in front of
//! what was queued meanwhile); after `close` nothing more is queued, and the writer
//! thread writes nothing more.
//!
//! Lock order: `state` is a leaf.

use super::Message;
use super::frame::{FRAME_HEADER_BYTES, MAX_PAYLOAD_BYTES, WireError};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// NDB's default SendBufferMemory.
pub const DEFAULT_SEND_BUFFER_BYTES: u64 = 2 << 20;

/// The largest frame a message can make.
pub const MAX_FRAME_BYTES: u64 = (FRAME_HEADER_BYTES + MAX_PAYLOAD_BYTES) as u64;

/// A connection's send-buffer limits (see the module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendLimits {
    /// SendBufferMemory.
    pub buffer_bytes: u64,
    /// Unsent bytes from which the connection is overloaded.
    pub overload_bytes: u64,
}

impl SendLimits {
    /// From `[tcp]` SendBufferMemory and OverloadLimit (0: 80% of the buffer).
    pub fn from_config(send_buffer_memory: u64, overload_limit: u64) -> SendLimits {
        let overload_bytes = if overload_limit == 0 {
            send_buffer_memory / 5 * 4
        } else {
            overload_limit.min(send_buffer_memory)
        };
        SendLimits {
            buffer_bytes: send_buffer_memory,
            overload_bytes,
        }
    }

    /// Unsent bytes a connection never holds more of.
    pub fn ceiling_bytes(&self) -> u64 {
        self.buffer_bytes + MAX_FRAME_BYTES
    }
}

impl Default for SendLimits {
    fn default() -> SendLimits {
        SendLimits::from_config(DEFAULT_SEND_BUFFER_BYTES, 0)
    }
}

/// What [`SendBuffer::push`] did.
#[derive(Debug)]
pub enum Queued {
    Yes,
    /// The buffer is closed (the connection is going away): dropped.
    Closed,
    /// Not queued: it would have taken the unsent bytes above the ceiling.
    Full {
        unsent_bytes: u64,
    },
    /// The message cannot be encoded (too large): not queued.
    Unencodable(WireError),
    /// Queued, but the direct write failed: the connection is broken.
    WriteFailed(std::io::Error),
}

/// Counters of one connection (ndbinfo's `transporters` columns).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendStats {
    pub bytes_sent: u64,
    pub unsent_bytes: u64,
    pub max_unsent_bytes: u64,
    /// Times the connection became overloaded.
    pub overload_count: u64,
    pub overloaded: bool,
}

struct State {
    /// Frames queued, not yet taken by the writer.
    pending: Vec<u8>,
    /// Bytes the writer took and has not finished writing.
    writing: u64,
    /// Someone writes to the socket: the writer thread or a direct sender.
    busy: bool,
    /// An empty buffer kept for the next direct send's batch (no allocation per send).
    spare: Vec<u8>,
    closed: bool,
    limits: SendLimits,
    overloaded: bool,
    overload_count: u64,
    max_unsent: u64,
}

impl State {
    fn unsent(&self) -> u64 {
        self.pending.len() as u64 + self.writing
    }

    fn note_level(&mut self) {
        let unsent = self.unsent();
        self.max_unsent = self.max_unsent.max(unsent);
        let over = unsent >= self.limits.overload_bytes;
        if over && !self.overloaded {
            self.overload_count += 1;
        }
        self.overloaded = over;
    }
}

/// See the module notes.
pub struct SendBuffer {
    state: Mutex<State>,
    /// Wakes the writer (bytes queued, or closed).
    queued: Condvar,
    /// Wakes senders waiting for room and flushes waiting for empty.
    drained: Condvar,
    bytes_sent: AtomicU64,
}

impl SendBuffer {
    pub fn new(limits: SendLimits) -> SendBuffer {
        SendBuffer {
            state: Mutex::new(State {
                pending: Vec::new(),
                writing: 0,
                busy: false,
                spare: Vec::new(),
                closed: false,
                limits,
                overloaded: false,
                overload_count: 0,
                max_unsent: 0,
            }),
            queued: Condvar::new(),
            drained: Condvar::new(),
            bytes_sent: AtomicU64::new(0),
        }
    }

    pub fn set_limits(&self, limits: SendLimits) {
        let mut s = self.state.lock();
        s.limits = limits;
        s.note_level();
        self.drained.notify_all();
    }

    pub fn limits(&self) -> SendLimits {
        self.state.lock().limits
    }

    /// Appends `msg` as one frame under the lock (see [`Queued`]).
    fn queue(s: &mut State, msg: &Message) -> Queued {
        if s.closed {
            return Queued::Closed;
        }
        let before = s.pending.len();
        if let Err(e) = msg.encode(&mut s.pending) {
            s.pending.truncate(before);
            return Queued::Unencodable(e);
        }
        let unsent = s.unsent();
        if unsent > s.limits.ceiling_bytes() {
            s.pending.truncate(before);
            return Queued::Full {
                unsent_bytes: unsent,
            };
        }
        s.note_level();
        Queued::Yes
    }

    /// Queues `msg` as one frame for the writer thread (see [`Queued`]), never writing
    /// itself: the tests' way to fill the buffer as a busy connection does (senders use
    /// [`SendBuffer::push_direct`]).
    #[cfg(test)]
    pub fn push(&self, msg: &Message) -> Queued {
        let mut s = self.state.lock();
        let q = Self::queue(&mut s, msg);
        drop(s);
        if matches!(q, Queued::Yes) {
            self.queued.notify_one();
        }
        q
    }

    /// Queues `msg` as one frame and, when nobody is writing, writes what is queued
    /// at once through `write_now`, which must not wait: it writes what the socket
    /// takes and returns how many bytes that was (0 when it would block). What it did
    /// not write is left to the writer thread, ahead of anything queued meanwhile. A
    /// failed write is [`Queued::WriteFailed`] (the frame stays queued; the caller
    /// closes the connection).
    pub fn push_direct(
        &self,
        msg: &Message,
        write_now: &mut dyn FnMut(&[u8]) -> std::io::Result<usize>,
    ) -> Queued {
        let mut s = self.state.lock();
        let q = Self::queue(&mut s, msg);
        if !matches!(q, Queued::Yes) {
            return q;
        }
        if s.busy {
            drop(s);
            self.queued.notify_one();
            return Queued::Yes;
        }
        s.busy = true;
        let mut batch = std::mem::take(&mut s.spare);
        batch.clear();
        std::mem::swap(&mut s.pending, &mut batch);
        s.writing = batch.len() as u64;
        drop(s);
        let r = write_now(&batch);
        let n = match &r {
            Ok(n) => (*n).min(batch.len()),
            Err(_) => 0,
        };
        self.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
        let mut s = self.state.lock();
        s.busy = false;
        s.writing = 0;
        if n < batch.len() {
            batch.drain(..n);
            batch.extend_from_slice(&s.pending);
            std::mem::swap(&mut s.pending, &mut batch);
        }
        batch.clear();
        s.spare = batch;
        s.note_level();
        let more = !s.pending.is_empty();
        drop(s);
        self.drained.notify_all();
        if more {
            self.queued.notify_one();
        }
        match r {
            Ok(_) => Queued::Yes,
            Err(e) => Queued::WriteFailed(e),
        }
    }

    /// Waits until fewer than SendBufferMemory bytes are unsent (then one more frame
    /// always fits under the ceiling), the buffer is closed, or `deadline` passes;
    /// returns whether there is room.
    pub fn wait_for_room(&self, deadline: Instant) -> bool {
        let mut s = self.state.lock();
        while !s.closed && s.unsent() >= s.limits.buffer_bytes {
            if self.drained.wait_until(&mut s, deadline).timed_out() {
                return s.unsent() < s.limits.buffer_bytes;
            }
        }
        true
    }

    /// Waits until everything queued is written, the buffer is closed, or `deadline`
    /// passes; returns whether it is empty.
    pub fn wait_drained(&self, deadline: Instant) -> bool {
        let mut s = self.state.lock();
        while !s.closed && s.unsent() > 0 {
            if self.drained.wait_until(&mut s, deadline).timed_out() {
                break;
            }
        }
        s.unsent() == 0
    }

    /// Whether the connection is overloaded (new work over it gets 1218).
    pub fn overloaded(&self) -> bool {
        let s = self.state.lock();
        s.unsent() >= s.limits.overload_bytes
    }

    /// Stops the buffer: nothing more is queued; the writer stops after its batch.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.queued.notify_all();
        self.drained.notify_all();
    }

    /// The writer's side: waits for queued bytes while nobody else writes and swaps
    /// them into `batch` (whose old contents are discarded); false once the buffer is
    /// closed. The caller then writes the batch and calls [`SendBuffer::written`].
    pub fn take(&self, batch: &mut Vec<u8>) -> bool {
        let mut s = self.state.lock();
        loop {
            if s.closed {
                return false;
            }
            if !s.pending.is_empty() && !s.busy {
                batch.clear();
                std::mem::swap(&mut s.pending, batch);
                s.writing = batch.len() as u64;
                s.busy = true;
                return true;
            }
            self.queued.wait(&mut s);
        }
    }

    /// The writer wrote the batch it took (or gave up on it: the connection broke).
    pub fn written(&self, bytes: usize) {
        self.bytes_sent.fetch_add(bytes as u64, Ordering::Relaxed);
        let mut s = self.state.lock();
        s.busy = false;
        s.writing = 0;
        s.note_level();
        drop(s);
        self.drained.notify_all();
    }

    pub fn stats(&self) -> SendStats {
        let s = self.state.lock();
        SendStats {
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            unsent_bytes: s.unsent(),
            max_unsent_bytes: s.max_unsent,
            overload_count: s.overload_count,
            overloaded: s.unsent() >= s.limits.overload_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn hb(view_id: u64) -> Message {
        Message::Heartbeat { view_id }
    }

    fn frame_len() -> u64 {
        let mut v = Vec::new();
        hb(1).encode(&mut v).expect("encode");
        v.len() as u64
    }

    #[test]
    fn limits_follow_ndb_defaults() {
        let d = SendLimits::default();
        assert_eq!(d.buffer_bytes, 2 << 20);
        assert_eq!(d.overload_bytes, (2 << 20) / 5 * 4);
        assert_eq!(SendLimits::from_config(1000, 300).overload_bytes, 300);
        assert_eq!(SendLimits::from_config(1000, 5000).overload_bytes, 1000);
    }

    #[test]
    fn overload_full_and_the_writer_draining() {
        let f = frame_len();
        // Overloaded from 3 frames unsent (the ceiling, one largest frame above the
        // buffer, is the next test's).
        let b = SendBuffer::new(SendLimits {
            buffer_bytes: 4 * f,
            overload_bytes: 3 * f,
        });
        for i in 0..2 {
            assert!(matches!(b.push(&hb(i)), Queued::Yes));
        }
        assert!(!b.overloaded());
        assert!(matches!(b.push(&hb(2)), Queued::Yes));
        assert!(b.overloaded());
        let st = b.stats();
        assert_eq!((st.unsent_bytes, st.overload_count), (3 * f, 1));
        // The writer takes all three frames in order, as one batch.
        let mut batch = Vec::new();
        assert!(b.take(&mut batch));
        assert_eq!(batch.len() as u64, 3 * f);
        assert!(b.overloaded(), "bytes being written are still unsent");
        b.written(batch.len());
        assert!(!b.overloaded());
        let st = b.stats();
        assert_eq!(
            (st.bytes_sent, st.unsent_bytes, st.max_unsent_bytes),
            (3 * f, 0, 3 * f)
        );
        assert!(b.wait_drained(Instant::now()));
        // A second overload is counted again.
        for i in 0..3 {
            assert!(matches!(b.push(&hb(i)), Queued::Yes));
        }
        assert_eq!(b.stats().overload_count, 2);
        b.close();
        assert!(matches!(b.push(&hb(9)), Queued::Closed));
        assert!(
            !b.take(&mut batch),
            "a closed buffer gives the writer nothing"
        );
    }

    #[test]
    fn a_frame_above_the_ceiling_is_refused_and_nothing_is_half_queued() {
        let f = frame_len();
        let b = SendBuffer::new(SendLimits {
            buffer_bytes: 0,
            overload_bytes: 0,
        });
        // The ceiling is one largest frame: fill it with heartbeats up to the edge.
        let fits = MAX_FRAME_BYTES / f;
        let mut big = Vec::new();
        for i in 0..fits {
            hb(i).encode(&mut big).expect("encode");
        }
        {
            let mut s = b.state.lock();
            s.pending = big;
        }
        match b.push(&hb(0)) {
            Queued::Full { unsent_bytes } => assert_eq!(unsent_bytes, (fits + 1) * f),
            other => panic!("expected Full, got {other:?}"),
        }
        assert_eq!(
            b.stats().unsent_bytes,
            fits * f,
            "the refused frame was taken out"
        );
    }

    #[test]
    fn a_sender_waiting_for_room_goes_on_once_the_writer_drains() {
        let f = frame_len();
        let b = std::sync::Arc::new(SendBuffer::new(SendLimits {
            buffer_bytes: 2 * f,
            overload_bytes: 2 * f,
        }));
        assert!(matches!(b.push(&hb(1)), Queued::Yes));
        assert!(matches!(b.push(&hb(2)), Queued::Yes));
        assert!(
            !b.wait_for_room(Instant::now() + Duration::from_millis(20)),
            "full: no room without the writer"
        );
        let w = {
            let b = b.clone();
            std::thread::spawn(move || {
                let mut batch = Vec::new();
                assert!(b.take(&mut batch));
                std::thread::sleep(Duration::from_millis(20));
                b.written(batch.len());
            })
        };
        assert!(b.wait_for_room(Instant::now() + Duration::from_secs(10)));
        w.join().expect("writer");
        assert_eq!(b.stats().bytes_sent, 2 * f);
    }

    fn encoded(msgs: &[Message]) -> Vec<u8> {
        let mut v = Vec::new();
        for m in msgs {
            m.encode(&mut v).expect("encode");
        }
        v
    }

    #[test]
    fn a_direct_send_writes_at_once_and_leaves_the_rest_in_order() {
        let f = frame_len() as usize;
        let b = SendBuffer::new(SendLimits::default());
        let mut socket = Vec::new();
        // Idle: the frame is written by the sender, nothing is left queued.
        let q = b.push_direct(&hb(1), &mut |bytes: &[u8]| {
            socket.extend_from_slice(bytes);
            Ok(bytes.len())
        });
        assert!(matches!(q, Queued::Yes));
        assert_eq!(socket, encoded(&[hb(1)]));
        assert_eq!(b.stats().unsent_bytes, 0);
        assert_eq!(b.stats().bytes_sent, f as u64);
        // The socket takes 5 bytes: the rest stays queued, ahead of later frames,
        // and the writer thread takes it.
        let q = b.push_direct(&hb(2), &mut |bytes: &[u8]| {
            socket.extend_from_slice(&bytes[..5]);
            Ok(5)
        });
        assert!(matches!(q, Queued::Yes));
        assert_eq!(b.stats().unsent_bytes, (f - 5) as u64);
        assert!(matches!(b.push(&hb(3)), Queued::Yes));
        let mut batch = Vec::new();
        assert!(b.take(&mut batch));
        socket.extend_from_slice(&batch);
        b.written(batch.len());
        assert_eq!(
            socket,
            encoded(&[hb(1), hb(2), hb(3)]),
            "bytes in queue order"
        );
        // While the writer thread writes, a direct send only queues.
        assert!(matches!(b.push(&hb(4)), Queued::Yes));
        assert!(b.take(&mut batch));
        let q = b.push_direct(&hb(5), &mut |_: &[u8]| -> std::io::Result<usize> {
            panic!("written while the writer thread writes")
        });
        assert!(matches!(q, Queued::Yes));
        socket.extend_from_slice(&batch);
        b.written(batch.len());
        assert!(
            b.take(&mut batch),
            "the direct send's frame is the writer's"
        );
        socket.extend_from_slice(&batch);
        b.written(batch.len());
        assert_eq!(socket, encoded(&[hb(1), hb(2), hb(3), hb(4), hb(5)]));
        assert_eq!(b.stats().bytes_sent, 5 * f as u64);
        // A failed write: reported, and the frame is still queued (not half written).
        let q = b.push_direct(&hb(6), &mut |_: &[u8]| {
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        });
        assert!(matches!(q, Queued::WriteFailed(_)));
        assert_eq!(b.stats().unsent_bytes, f as u64);
        // A closed buffer refuses a direct send as it refuses a push.
        b.close();
        assert!(matches!(
            b.push_direct(&hb(7), &mut |_: &[u8]| Ok(0)),
            Queued::Closed
        ));
    }

    #[test]
    fn the_writer_thread_waits_while_a_direct_send_writes() {
        let b = std::sync::Arc::new(SendBuffer::new(SendLimits::default()));
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let sender = {
            let b = b.clone();
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let q = b.push_direct(&hb(1), &mut |bytes: &[u8]| {
                    entered_tx.send(()).expect("entered");
                    release_rx.recv().expect("release");
                    out.extend_from_slice(&bytes[..3]);
                    Ok(3)
                });
                assert!(matches!(q, Queued::Yes));
                out
            })
        };
        entered_rx.recv().expect("the direct send is writing");
        assert!(matches!(b.push(&hb(2)), Queued::Yes));
        let writer = {
            let b = b.clone();
            std::thread::spawn(move || {
                let mut batch = Vec::new();
                assert!(b.take(&mut batch));
                b.written(batch.len());
                batch
            })
        };
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            !writer.is_finished(),
            "the writer must wait for the direct send"
        );
        release_tx.send(()).expect("release");
        let mut socket = sender.join().expect("sender");
        socket.extend_from_slice(&writer.join().expect("writer"));
        assert_eq!(socket, encoded(&[hb(1), hb(2)]));
    }
}
