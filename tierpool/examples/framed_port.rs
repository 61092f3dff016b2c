//! Porting a tokio-util codec server to pooled buffers: the lines that change.
//!
//! A line server (each line comes back upper-cased) with tokio-util's `LinesCodec`, unchanged.
//! tokio-util's `FramedRead` and `FramedWrite` keep a `BytesMut` each per connection for the
//! connection's life, grown to its largest frame; tierpool's take their buffers from a pool and
//! hold one only while bytes wait to be read or written, so an idle connection holds none.
//!
//! ```sh
//! cargo run -p tierpool --example framed_port --features tokio-util
//! ```

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::LinesCodec;
// - use tokio_util::codec::{FramedRead, FramedWrite};
use tierpool::io::codec::{FramedRead, FramedWrite};

/// One connection: every line read is written back upper-cased.
async fn serve(
    socket: TcpStream,
    pool: tierpool::BufferPool,
) -> Result<(), Box<dyn std::error::Error>> {
    let (read, write) = socket.into_split();
    // - let mut lines = FramedRead::new(read, LinesCodec::new_with_max_length(64 << 10));
    // - let mut replies = FramedWrite::new(write, LinesCodec::new());
    let mut lines = FramedRead::new(
        read,
        LinesCodec::new_with_max_length(64 << 10),
        pool.clone(),
    );
    let mut replies = FramedWrite::new(write, LinesCodec::new(), pool);
    while let Some(line) = lines.next().await {
        replies.send(line?.to_uppercase()).await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // One pool for every connection; the background trimmer gives its memory back once the
    // server goes quiet. (`tierpool::default_pool()` is such a pool, shared by the process.)
    let pool = tierpool::BufferPool::builder()
        .background_trim(true)
        .build()?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = {
        let pool = pool.clone();
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    break;
                };
                let pool = pool.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(socket, pool).await {
                        eprintln!("connection: {e}");
                    }
                });
            }
        })
    };

    // A client, to show it working: two lines, their replies.
    let mut client = BufReader::new(TcpStream::connect(addr).await?);
    client
        .get_mut()
        .write_all(b"hello\npooled buffers\n")
        .await?;
    for expected in ["HELLO", "POOLED BUFFERS"] {
        let mut reply = String::new();
        client.read_line(&mut reply).await?;
        assert_eq!(reply.trim_end(), expected);
        println!("{}", reply.trim_end());
    }
    drop(client);
    server.abort();
    println!("kept for reuse: {} bytes", pool.stats().retained_bytes);
    Ok(())
}
