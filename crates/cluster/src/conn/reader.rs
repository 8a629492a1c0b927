//! The reader thread of one connection: reads response frames (through TLS if any) and hands
//! each to its waiter.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};

use bytes::BytesMut;

use super::Shared;
use crate::config::BrokerAddr;
use topicfs_source::sync::lock;

/// The reader thread of one connection.
pub(super) struct Reader {
    pub(super) addr: BrokerAddr,
    pub(super) socket: TcpStream,
    pub(super) writer: TcpStream,
    pub(super) tls: Option<Arc<Mutex<rustls::ClientConnection>>>,
    pub(super) write_lock: Arc<Mutex<()>>,
    pub(super) shared: Arc<Shared>,
    pub(super) max_frame: usize,
}

impl Reader {
    pub(super) fn run(mut self) {
        let why = match self.read_loop() {
            Ok(()) => "the broker closed the connection".to_string(),
            Err(e) => e,
        };
        log::debug!("connection to broker {} ended: {why}", self.addr);
        self.shared.kill(why);
        let _ = self.socket.shutdown(Shutdown::Both);
    }

    /// Reads until EOF or an error; returns `Ok` on a clean EOF.
    fn read_loop(&mut self) -> std::result::Result<(), String> {
        let mut raw = vec![0u8; 256 * 1024];
        let mut inbuf = BytesMut::with_capacity(256 * 1024);
        loop {
            let n = match self.socket.read(&mut raw) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("read failed: {e}")),
            };
            let chunk = raw.get(..n).unwrap_or_default();
            match &self.tls {
                None => inbuf.extend_from_slice(chunk),
                Some(tls) => {
                    let eof = self.decrypt(tls, chunk, &mut inbuf)?;
                    if eof {
                        self.frames(&mut inbuf)?;
                        return Ok(());
                    }
                }
            }
            self.frames(&mut inbuf)?;
            if self.shared.dead().is_some() {
                return Err("connection killed".into());
            }
        }
    }

    /// Feeds TLS bytes to rustls and appends the plaintext; `Ok(true)` on close_notify.
    fn decrypt(
        &self,
        tls: &Mutex<rustls::ClientConnection>,
        mut chunk: &[u8],
        inbuf: &mut BytesMut,
    ) -> std::result::Result<bool, String> {
        let mut plain = [0u8; 16 * 1024];
        let mut conn = lock(tls);
        let mut eof = false;
        while !chunk.is_empty() {
            conn.read_tls(&mut chunk).map_err(|e| format!("TLS read: {e}"))?;
            let state = conn.process_new_packets().map_err(|e| format!("TLS: {e}"))?;
            loop {
                match conn.reader().read(&mut plain) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => inbuf.extend_from_slice(plain.get(..n).unwrap_or_default()),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(format!("TLS read: {e}")),
                }
            }
            if state.peer_has_closed() {
                eof = true;
            }
        }
        // Post-handshake messages that need an answer (key updates): flushed now if no request
        // is being written, else by the next writer, which drains rustls's buffer in order.
        if conn.wants_write()
            && let Ok(_guard) = self.write_lock.try_lock()
        {
            let mut out = Vec::new();
            while conn.wants_write() {
                conn.write_tls(&mut out).map_err(|e| format!("TLS write: {e}"))?;
            }
            drop(conn);
            (&self.writer).write_all(&out).map_err(|e| format!("TLS write: {e}"))?;
        }
        Ok(eof)
    }

    /// Hands every whole frame in `inbuf` to its waiter.
    fn frames(&self, inbuf: &mut BytesMut) -> std::result::Result<(), String> {
        loop {
            let Some(len) = inbuf.get(..4) else { return Ok(()) };
            let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| (4..=self.max_frame).contains(&l))
                .ok_or_else(|| {
                    format!(
                        "response frame of {len} bytes (limit {} bytes): not a Kafka response",
                        self.max_frame
                    )
                })?;
            if inbuf.len() < 4 + len {
                inbuf.reserve(4 + len - inbuf.len());
                return Ok(());
            }
            let frame = inbuf.split_to(4 + len).freeze().slice(4..);
            let id =
                frame.get(..4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(-1);
            let waiter = lock(&self.shared.pending).waiters.remove(&id);
            match waiter {
                Some(tx) => {
                    let _ = tx.send(frame);
                }
                None => log::debug!(
                    "broker {}: response to correlation id {id} nobody waits for",
                    self.addr
                ),
            }
        }
    }
}
