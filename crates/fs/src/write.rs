//! Writes: `write`, `flush` and `fsync` of `append`, group and `config` files, and the
//! refusals of changes on a read-only mount or after the shutdown started.

use std::sync::atomic::Ordering;

use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;

use super::TopicFs;
use super::attr::OpenRequest;
use super::handle::Handle;

impl TopicFs {
    /// Writes to an open `append` file: complete lines become one append, visible when this
    /// returns. `owner` is the kernel's lock owner of the writing process, when sent. Returns
    /// the bytes accepted (all of `data`).
    pub fn write(&self, fh: u64, data: &[u8], owner: Option<u64>) -> Result<u32> {
        let _op = topicfs_source::Operation::begin();
        self.check_open()?;
        match &*self.handles.get(fh)? {
            Handle::Append(state) => {
                let (n, due) = {
                    let mut state = lock(state);
                    let n = state.write(data, owner)?;
                    (n, state.sizing_due())
                };
                if let Some(part) = due {
                    self.size_appended(part);
                }
                Ok(u32::try_from(n).unwrap_or(u32::MAX))
            }
            Handle::Group { file, .. } => {
                self.check_writable()?;
                self.group_write(file, data)?;
                Ok(u32::try_from(data.len()).unwrap_or(u32::MAX))
            }
            // Not the data dir's: declaring an index works on a read-only mount too.
            Handle::Indexes { topic, .. } => {
                self.indexes_write(topic, data)?;
                Ok(u32::try_from(data.len()).unwrap_or(u32::MAX))
            }
            Handle::Config(handle) => {
                self.check_writable()?;
                self.config_write(handle, data)?;
                Ok(u32::try_from(data.len()).unwrap_or(u32::MAX))
            }
            _ => Err(self.write_refusal("writing a file other than append")),
        }
    }

    /// `flush` (every `close()` of a descriptor): appends an open `append` file's partial last
    /// line when the closing process (`owner`) wrote it, so its errors reach that `close()`;
    /// see [`AppendState::flush_by`](super::append::AppendState::flush_by).
    pub fn flush(&self, fh: u64, owner: Option<u64>) -> Result<()> {
        let _op = topicfs_source::Operation::begin();
        self.check_open()?;
        match &*self.handles.get(fh)? {
            Handle::Append(state) => lock(state).flush_by(owner),
            Handle::Config(handle) => self.config_flush(handle),
            Handle::Stream { ino, stream, .. } => match self.groups.read_to(fh) {
                Some(read_to) => self.auto_commit_on_close(*ino, stream, read_to),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// `fsync`: makes an append file's records durable. Nothing to do for read-only files.
    pub fn fsync(&self, fh: u64) -> Result<()> {
        let _op = topicfs_source::Operation::begin();
        match &*self.handles.get(fh)? {
            Handle::Append(state) => lock(state).sync(),
            _ => Ok(()),
        }
    }

    /// Appends after the shutdown started would land after the clean-shutdown marker: refuse
    /// them (`ESTALE`: the mount they were opened on is gone).
    fn check_open(&self) -> Result<()> {
        if self.closing.load(Ordering::SeqCst) { Err(Error::StaleHandle) } else { Ok(()) }
    }

    pub(super) fn check_writable(&self) -> Result<()> {
        if self.options.read_only { Err(Error::ReadOnly) } else { Ok(()) }
    }

    pub(super) fn write_refusal(&self, what: &'static str) -> Error {
        if self.options.read_only { Error::ReadOnly } else { Error::NotPermitted(what) }
    }

    pub(super) fn refuse_write(&self, request: OpenRequest, what: &'static str) -> Result<()> {
        if request.write || request.truncate { Err(self.write_refusal(what)) } else { Ok(()) }
    }
}
