//! The background writer: one thread per REDO log that writes complete blocks of every
//! part between global checkpoints, so that the bounded buffer drains and the GCP's
//! `seal_and_sync` finds little left to write. It never fdatasyncs (the GCP does).
//!
//! It sleeps on `ctl_cv` until signalled: by `append` when a part has a batch of
//! complete blocks, by `wait_for_room` when a committer waits for buffer space, by
//! `release_before` (blocks that did not fit the ring may fit now) and by `stop`.
//! Lock order: `ctl` is never held while a part lock is taken here (taken and
//! released before the parts are visited). After the first I/O error (sticky) it
//! writes nothing more.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::Inner;
use crate::error::{Result, codes};

/// Writer control (under `Inner::ctl`).
#[derive(Debug, Default)]
pub(crate) struct WriterCtl {
    pub pending: bool,
    pub stop: bool,
}

/// Wake the writer.
pub(crate) fn signal(inner: &Inner) {
    let mut c = inner.ctl.lock();
    c.pending = true;
    inner.ctl_cv.notify_one();
}

/// Ask the writer to write out everything and exit.
pub(crate) fn stop(inner: &Inner) {
    let mut c = inner.ctl.lock();
    c.stop = true;
    inner.ctl_cv.notify_one();
}

pub(crate) fn spawn(inner: Arc<Inner>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("redo-writer".into())
        .spawn(move || run(&inner))
        .map_err(|e| codes::internal(format_args!("cannot start the redo log writer: {e}")))
}

fn run(inner: &Inner) {
    loop {
        let stop = {
            let mut c = inner.ctl.lock();
            while !c.pending && !c.stop {
                inner.ctl_cv.wait(&mut c);
            }
            c.pending = false;
            c.stop
        };
        if inner.sticky.lock().is_none() {
            for p in &inner.parts {
                let mut io = p.io.lock();
                if stop {
                    p.state.lock().seal();
                }
                // An error is sticky already (write_out kept it under the io lock).
                if p.write_out(&mut io, &inner.geo, None, &inner.sticky)
                    .is_err()
                {
                    break;
                }
            }
        }
        if stop {
            return;
        }
    }
}
