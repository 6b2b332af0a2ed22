//! `cp.async` with the group semantics of the GPU: a copy reads its source when issued but its
//! bytes land in shared memory only when a `cp_async_wait` completes its group, so reading the
//! destination earlier (by any thread) is an error naming the line. Each thread has its own
//! groups, as in PTX; the TMA stores' bulk groups (`tma`) are counted the same way.

use std::collections::VecDeque;

use zinc_dsl::ir::Expr;

use crate::error::ErrorKind;
use crate::exec::{Lanes, Machine, Mask, Result, UNSET};
use crate::memory::Touch;
use crate::value::{Pointer, Value};

/// One copy in flight.
pub(crate) struct Copy<'m> {
    dst: Pointer,
    data: Vec<u8>,
    who: Touch<'m>,
}

/// A thread's asynchronous operations of one kind: those not yet committed, and the committed
/// groups, oldest first.
pub(crate) struct Groups<T> {
    open: Vec<T>,
    committed: VecDeque<Vec<T>>,
}

impl<T> Default for Groups<T> {
    fn default() -> Self {
        Groups {
            open: Vec::new(),
            committed: VecDeque::new(),
        }
    }
}

impl<T> Groups<T> {
    pub fn issue(&mut self, op: T) {
        self.open.push(op);
    }

    /// The open operations become a group (possibly empty, as in PTX).
    pub fn commit(&mut self) {
        let open = std::mem::take(&mut self.open);
        self.committed.push_back(open);
    }

    /// A wait that leaves at most `n` groups: the operations of the older groups it completes,
    /// oldest first.
    pub fn complete(&mut self, n: usize) -> Vec<T> {
        let mut done = Vec::new();
        while self.committed.len() > n {
            done.extend(self.committed.pop_front().unwrap_or_default());
        }
        done
    }

    /// The oldest operation not completed, and whether it was committed.
    pub fn oldest(&self) -> Option<(&T, bool)> {
        let committed = self.committed.iter().flatten().map(|op| (op, true));
        committed
            .chain(self.open.iter().map(|op| (op, false)))
            .next()
    }
}

/// A thread's copies.
pub(crate) type Copies<'m> = Groups<Copy<'m>>;

impl<'m> Machine<'m, '_> {
    /// `cp_async(dst, src, bytes, valid)` for the active threads.
    pub(crate) fn cp_async(
        &mut self,
        bytes: u8,
        args: &[Lanes],
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        let [dst, src, valid] = args else {
            return Err(self.malformed(e.span, "cp_async without three operands"));
        };
        let len = usize::from(bytes);
        for t in mask.lanes() {
            let (d, s) = (self.pointer(dst[t], e.span)?, self.pointer(src[t], e.span)?);
            let valid = valid[t] == Value::Bool(true);
            // The source is read only when valid (src-size 0 reads nothing).
            let checked = if valid { [d, s].to_vec() } else { vec![d] };
            if let Some(p) = checked.iter().find(|p| p.offset % i64::from(bytes) != 0) {
                return Err(self.error_at(
                    e.span,
                    ErrorKind::Misaligned {
                        op: "cp_async",
                        thread: self.thread_id(t),
                        offset: p.offset,
                        align: u32::from(bytes),
                    },
                ));
            }
            let who = self.touch(t, e.span);
            let data = match valid {
                true => self.mem.read(s, len, who),
                false => Ok(vec![0; len]),
            };
            let data = data.map_err(|f| self.fault(f, t, e.span))?;
            self.mem
                .start_copy(d, len, who)
                .map_err(|f| self.fault(f, t, e.span))?;
            self.copies[t].issue(Copy { dst: d, data, who });
        }
        Ok(vec![UNSET; self.threads])
    }

    /// `cp_async_commit()`: the open copies become a group (possibly empty, as in PTX).
    pub(crate) fn cp_async_commit(&mut self, mask: &Mask) -> Lanes {
        for t in mask.lanes() {
            self.copies[t].commit();
        }
        vec![UNSET; self.threads]
    }

    /// `cp_async_wait(n)`: complete the oldest groups until at most `n` are in flight.
    pub(crate) fn cp_async_wait(&mut self, n: u8, mask: &Mask, e: &'m Expr) -> Result<Lanes> {
        for t in mask.lanes() {
            for c in self.copies[t].complete(usize::from(n)) {
                self.mem
                    .finish_copy(c.dst, &c.data, c.who)
                    .map_err(|f| self.fault(f, t, e.span))?;
            }
        }
        Ok(vec![UNSET; self.threads])
    }
}
