//! A stdio MCP server as an upstream: one child process, newline-delimited
//! JSON-RPC on its stdin and stdout, its stderr to the gateway's log.

use bytes::Bytes;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The command that starts a stdio MCP server, run by `sh -c`.
#[derive(Debug, Clone)]
pub struct StdioCommand {
    command: String,
}

/// The longest line a child may write (a message of 16 MiB).
const MAX_LINE: usize = 16 << 20;

impl StdioCommand {
    /// `command` (a shell command line, e.g. `npx -y some-mcp-server`).
    pub fn new(command: &str) -> Result<StdioCommand, String> {
        if command.trim().is_empty() {
            return Err("the command is empty".into());
        }
        Ok(StdioCommand { command: command.to_owned() })
    }

    /// The command line.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Starts a child: its stdin to write to, its stdout to read, and the
    /// child (killed when dropped). Its stderr goes to the log, a line an
    /// event, tagged with `tag`.
    pub(crate) fn spawn(&self, tag: String) -> std::io::Result<(Child, ChildStdin, Lines)> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A group of its own, so that ending the session ends everything it
        // started (`sh -c "npx ..."` leaves node a grandchild).
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        if let Some(err) = child.stderr.take() {
            tokio::spawn(async move {
                let mut lines = BufReader::new(err).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    tracing::info!(upstream = %tag, "{l}");
                }
            });
        }
        Ok((child, stdin, Lines { out: BufReader::new(stdout), buf: Vec::new() }))
    }
}

/// Writes one message as a line.
pub(crate) async fn write_line(stdin: &mut ChildStdin, message: &[u8]) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(message.len() + 1);
    line.extend_from_slice(message);
    line.push(b'\n');
    stdin.write_all(&line).await?;
    stdin.flush().await
}

/// The lines a child writes on its stdout.
#[derive(Debug)]
pub(crate) struct Lines {
    out: BufReader<ChildStdout>,
    buf: Vec<u8>,
}

impl Lines {
    /// The next non-empty line; `None` at the end (the child closed its
    /// stdout or exited), or for a line over 16 MiB, which ends the stream.
    pub(crate) async fn next(&mut self) -> Option<Bytes> {
        loop {
            self.buf.clear();
            let n = (&mut self.out).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut self.buf).await.ok()?;
            if n == 0 || self.buf.len() > MAX_LINE {
                return None;
            }
            let line = self.buf.trim_ascii();
            if !line.is_empty() {
                return Some(Bytes::copy_from_slice(line));
            }
        }
    }
}
