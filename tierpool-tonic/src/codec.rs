//! [`PooledCodec`]: a tonic `Codec` for generated services whose decoder moves each message
//! into pooled memory.

use std::fmt;
use std::io;
use std::marker::PhantomData;

use bytes::Buf;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

use crate::decoded::decode_error;
use crate::status;
use tierpool::BufferPool;

/// The first size of the buffers tonic keeps per stream with this codec (its default is
/// 8 KiB): tonic grows them to the largest message anyway, and with this codec no decoded
/// message refers to them.
pub const CODEC_BUFFER_SIZE: usize = 1 << 10;

/// How many bytes of ready messages tonic batches into one frame (its default).
const YIELD_THRESHOLD: usize = 32 << 10;

/// A tonic [`Codec`] for prost messages, for tonic-prost-build's `codec_path`
/// (`"tierpool_tonic::PooledCodec"`) in place of `tonic_prost::ProstCodec`: the decoder
/// copies each message out of tonic's receive buffer into a buffer from the pool and decodes
/// it from there, so a message the handler keeps (and its `Bytes` fields, when prost
/// generates them as `Bytes`) refers to pooled memory, never to tonic's per-stream buffer;
/// the encoder writes into tonic's buffer as prost's does. Both ask tonic for 1 KiB buffers
/// ([`CODEC_BUFFER_SIZE`]) instead of 8 KiB.
///
/// tonic's decoder is called synchronously, so under a budget
/// ([`Builder::max_in_use_bytes`](tierpool::Builder::max_in_use_bytes)) with no room for a
/// message now, the call fails with `RESOURCE_EXHAUSTED` instead of waiting; the waiting
/// reader is [`MessageReader`](crate::MessageReader)'s.
///
/// `Default` (what generated code calls) uses [`default_pool`](tierpool::default_pool);
/// [`with_pool`](Self::with_pool) takes another.
///
/// # What a codec cannot fix
///
/// tonic still copies every HTTP/2 data frame into its own per-stream buffer before the
/// decoder sees a message, and that buffer grows to the largest message received and stays
/// that large until the stream ends: a client-streaming or bidi stream, or a client reading
/// a streaming response, keeps its largest message's size for its life. For unary and
/// server-streaming methods on a server the request is one message and the stream ends after
/// it, so the codec is the whole port. Streaming requests and responses read through
/// [`PooledMethods`](crate::PooledMethods) and [`PooledClient`](crate::PooledClient) hold
/// nothing between messages.
pub struct PooledCodec<E, D> {
    pool: BufferPool,
    _messages: PhantomData<fn(E) -> D>,
}

impl<E, D> PooledCodec<E, D> {
    /// A codec whose decoded messages live in `pool`'s buffers.
    pub fn with_pool(pool: BufferPool) -> Self {
        PooledCodec {
            pool,
            _messages: PhantomData,
        }
    }
}

impl<E, D> Default for PooledCodec<E, D> {
    fn default() -> Self {
        PooledCodec::with_pool(tierpool::default_pool().clone())
    }
}

impl<E, D> Clone for PooledCodec<E, D> {
    fn clone(&self) -> Self {
        PooledCodec::with_pool(self.pool.clone())
    }
}

impl<E, D> fmt::Debug for PooledCodec<E, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledCodec")
            .field("pool", &self.pool.name())
            .finish()
    }
}

impl<E, D> Codec for PooledCodec<E, D>
where
    E: prost::Message + Send + 'static,
    D: prost::Message + Default + Send + 'static,
{
    type Encode = E;
    type Decode = D;
    type Encoder = PooledEncoder<E>;
    type Decoder = PooledDecoder<D>;

    fn encoder(&mut self) -> Self::Encoder {
        PooledEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        PooledDecoder {
            pool: self.pool.clone(),
            _message: PhantomData,
        }
    }
}

/// [`PooledCodec`]'s encoder: prost's encoding into tonic's buffer, which tonic asks for at
/// [`CODEC_BUFFER_SIZE`].
pub struct PooledEncoder<E>(PhantomData<fn(E)>);

impl<E> fmt::Debug for PooledEncoder<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PooledEncoder")
    }
}

impl<E: prost::Message> Encoder for PooledEncoder<E> {
    type Item = E;
    type Error = Status;

    fn encode(&mut self, item: E, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("could not encode a message: {e}")))
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(CODEC_BUFFER_SIZE, YIELD_THRESHOLD)
    }
}

/// [`PooledCodec`]'s decoder: each message copied into a pooled buffer of its length, then
/// decoded from a `Bytes` view of it.
pub struct PooledDecoder<D> {
    pool: BufferPool,
    _message: PhantomData<fn() -> D>,
}

impl<D> fmt::Debug for PooledDecoder<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledDecoder")
            .field("pool", &self.pool.name())
            .finish()
    }
}

impl<D: prost::Message + Default> Decoder for PooledDecoder<D> {
    type Item = D;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<D>, Status> {
        let mut buf = self
            .pool
            .try_get_exact(src.remaining())
            .map_err(status::from_alloc)?;
        while src.has_remaining() {
            let chunk = src.chunk();
            let n = chunk.len();
            buf.extend_from_slice(chunk);
            src.advance(n);
        }
        D::decode(buf.into_bytes()).map(Some).map_err(decode_error)
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(CODEC_BUFFER_SIZE, YIELD_THRESHOLD)
    }
}

// tonic's `Encoder::Error` must come from `io::Error`; `Status` does.
const _: fn(io::Error) -> Status = Status::from;
