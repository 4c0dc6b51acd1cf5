//! The web server's HTTP/1.x layer (ADR-0109): one request per
//! connection, read as a head of at most [`MAX_HEAD`] bytes within
//! [`HEAD_TIME`] and parsed by `httparse`; a body is never held: one over
//! [`MAX_BODY`] (or of unknown length) is refused 413 from its
//! `Content-Length` alone, a smaller one is read and dropped. Every reply
//! closes the connection.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most bytes of a request's line and headers.
pub const MAX_HEAD: usize = 8 * 1024;

/// The most bytes of a request body (the form is a `GET`: none is needed).
pub const MAX_BODY: u64 = 4 * 1024;

/// How long a client has to send its request's head (and small body).
pub const HEAD_TIME: Duration = Duration::from_secs(10);

/// How long a reply that is not a run may take to write.
pub const WRITE_TIME: Duration = Duration::from_secs(60);

/// A request the server answers: its target (path and query).
#[derive(Debug)]
pub struct Request {
    /// The path and query, as sent.
    pub target: String,
}

/// A request refused before it is routed: the status and why.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// The page's message.
    pub message: String,
}

fn refuse(status: u16, message: String) -> Refusal {
    Refusal { status, message }
}

/// Reads one request from `stream`: `Ok(None)` when the client went away
/// or was too slow (nothing to answer), a [`Refusal`] for a request the
/// server does not take.
pub async fn read_request(stream: &mut TcpStream) -> Result<Option<Request>, Refusal> {
    let read = tokio::time::timeout(HEAD_TIME, async {
        let Some((mut head, end)) = read_head(stream).await? else {
            return Ok(None);
        };
        let (target, body) = parse_head(&head[..end])?;
        // The body's bytes already read count towards it.
        let left = body.saturating_sub((head.len() - end) as u64);
        head.clear();
        if left > 0 && stream.take(left).read_to_end(&mut head).await.is_err() {
            return Ok(None);
        }
        Ok(Some(Request { target }))
    });
    read.await.unwrap_or(Ok(None))
}

/// The bytes read up to the end of the head, and where the head ends
/// (after its blank line); `None` if the connection closed first.
async fn read_head(stream: &mut TcpStream) -> Result<Option<(Vec<u8>, usize)>, Refusal> {
    let mut bytes = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let Ok(n) = stream.read(&mut chunk).await else {
            return Ok(None);
        };
        if n == 0 {
            return Ok(None);
        }
        let from = bytes.len().saturating_sub(3);
        bytes.extend_from_slice(&chunk[..n]);
        if let Some(at) = bytes[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some((bytes, from + at + 4)));
        }
        if bytes.len() > MAX_HEAD {
            let message = format!("the request's head is over {MAX_HEAD} B");
            return Err(refuse(431, message));
        }
    }
}

/// The target of the request `head` and its body's length, or why it is
/// refused: not HTTP, a body over [`MAX_BODY`] or of unknown length, not
/// a `GET`.
fn parse_head(head: &[u8]) -> Result<(String, u64), Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let bad = |what: &str| refuse(400, format!("not an HTTP request: {what}"));
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(bad("an incomplete head")),
        Err(error) => return Err(bad(&error.to_string())),
    }
    let mut body = 0u64;
    for header in request.headers.iter() {
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            let message =
                format!("a request body of unknown length; bodies are capped at {MAX_BODY} B");
            return Err(refuse(413, message));
        }
        if header.name.eq_ignore_ascii_case("content-length") {
            let text = String::from_utf8_lossy(header.value);
            body = text
                .trim()
                .parse()
                .map_err(|_| bad(&format!("Content-Length `{text}`")))?;
        }
    }
    if body > MAX_BODY {
        let message = format!(
            "a request body of {body} B; bodies are capped at {MAX_BODY} B (the form is a GET)"
        );
        return Err(refuse(413, message));
    }
    match request.method {
        Some("GET") => Ok((request.path.unwrap_or("/").to_owned(), body)),
        method => Err(refuse(
            405,
            format!(
                "method {}: the server answers GET only",
                method.unwrap_or("?")
            ),
        )),
    }
}

/// The reason phrase of `status`.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// The head of a reply: its status line and headers, `length` if known
/// (else the body ends at the close), `extra` lines as given.
pub fn reply_head(status: u16, content_type: &str, length: Option<u64>, extra: &str) -> String {
    let length = length.map_or_else(String::new, |n| format!("Content-Length: {n}\r\n"));
    format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\n{length}{extra}\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        reason(status)
    )
}

/// Writes a whole reply and closes, within [`WRITE_TIME`].
pub async fn respond(mut stream: TcpStream, status: u16, content_type: &str, body: &[u8]) {
    let head = reply_head(status, content_type, Some(body.len() as u64), "");
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await
    };
    if let Ok(Ok(())) = tokio::time::timeout(WRITE_TIME, write).await {
        close(stream).await;
    }
}

/// Ends the reply: the write side shut, then what the client still sends
/// (a refused body) read and dropped for a moment, at most 64 KiB, so
/// that closing with unread bytes does not reset the reply away.
pub async fn close(mut stream: TcpStream) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let drain = async {
        let mut left = 64 * 1024;
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left -= n.min(left),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(head: &str) -> Result<(String, u64), u16> {
        parse_head(head.as_bytes()).map_err(|r| r.status)
    }

    #[test]
    fn a_head_is_refused_by_its_body_length_before_its_method() {
        assert_eq!(
            status("GET /a?b=1 HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(("/a?b=1".to_owned(), 0))
        );
        assert_eq!(
            status("GET / HTTP/1.0\r\nContent-Length: 10\r\n\r\n"),
            Ok(("/".to_owned(), 10))
        );
        let huge = "POST / HTTP/1.1\r\nContent-Length: 1000000000000\r\n\r\n";
        assert_eq!(status(huge), Err(413));
        assert_eq!(
            status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(413)
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\n"),
            Err(405)
        );
        assert_eq!(
            status("GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Err(400)
        );
        assert_eq!(status("\x01\x02 nonsense\r\n\r\n"), Err(400));
    }
}
