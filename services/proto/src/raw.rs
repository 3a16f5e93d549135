//! A tonic codec that sends and receives a message's raw protobuf bytes, so
//! a caller can build any request from the descriptor set or by hand (a
//! field of the wrong wire type, a body of an exact size) and read any answer
//! undecoded. The hostile-input tests of control and the supervisor drive
//! the servers through it. Must never interpret the bytes.

use prost::bytes::{Buf as _, BufMut as _};
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// The codec: `Vec<u8>` in, `Vec<u8>` out.
#[derive(Debug, Default, Clone, Copy)]
pub struct RawCodec;

/// Writes the bytes as they are.
#[derive(Debug)]
pub struct RawEncoder;

/// Reads the whole message's bytes.
#[derive(Debug)]
pub struct RawDecoder;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let mut v = vec![0; src.remaining()];
        src.copy_to_slice(&mut v);
        Ok(Some(v))
    }
}
