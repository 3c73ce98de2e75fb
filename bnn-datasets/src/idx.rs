//! The IDX format of MNIST and Fashion-MNIST (raw or gzip): a 4-byte magic `00 00 08 n`
//! (unsigned bytes, `n` dimensions), `n` big-endian `u32` sizes, then the row-major data.

use crate::error::DataError;
use std::io::Read;
use std::path::Path;

/// An IDX array of unsigned bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct IdxArray {
    /// Sizes, outermost first (`[n, rows, cols]` for images, `[n]` for labels).
    pub dims: Vec<usize>,
    /// Row-major data, `dims.iter().product()` bytes.
    pub data: Vec<u8>,
}

const UNSIGNED_BYTE: u8 = 0x08;
/// More dimensions than any IDX file uses; a larger count means a corrupt header.
const MAX_DIMS: u8 = 8;

fn format_error(path: &Path, offset: usize, expected: String, found: String) -> DataError {
    DataError::Format {
        path: path.to_path_buf(),
        offset: offset as u64,
        expected,
        found,
    }
}

/// Parses IDX bytes; `path` only names the file in errors.
///
/// # Errors
/// [`DataError::Format`] for a wrong magic, an unsupported element type, a header cut short,
/// a size product that overflows, or a data section shorter or longer than the header says.
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray, DataError> {
    let (dims, header) = parse_header(bytes, path)?;
    Ok(IdxArray {
        dims,
        data: bytes[header..].to_vec(),
    })
}

/// Like [`parse_idx`], reusing `bytes` for the data (no second copy of a large file).
///
/// # Errors
/// As [`parse_idx`].
pub fn parse_idx_owned(mut bytes: Vec<u8>, path: &Path) -> Result<IdxArray, DataError> {
    let (dims, header) = parse_header(&bytes, path)?;
    bytes.drain(..header);
    Ok(IdxArray { dims, data: bytes })
}

/// Validates the header and the data length; returns the sizes and the header length.
fn parse_header(bytes: &[u8], path: &Path) -> Result<(Vec<usize>, usize), DataError> {
    if bytes.len() < 4 {
        return Err(format_error(
            path,
            bytes.len(),
            "a 4-byte IDX magic number".into(),
            format!("end of file after {} bytes", bytes.len()),
        ));
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(format_error(
            path,
            0,
            "IDX magic starting 00 00".into(),
            format!("{:02x} {:02x}", bytes[0], bytes[1]),
        ));
    }
    if bytes[2] != UNSIGNED_BYTE {
        return Err(format_error(
            path,
            2,
            "element type 0x08 (unsigned byte)".into(),
            format!("0x{:02x}", bytes[2]),
        ));
    }
    let ndims = bytes[3];
    if ndims == 0 || ndims > MAX_DIMS {
        return Err(format_error(
            path,
            3,
            format!("a dimension count in 1..={MAX_DIMS}"),
            ndims.to_string(),
        ));
    }
    let header = 4 + 4 * ndims as usize;
    if bytes.len() < header {
        return Err(format_error(
            path,
            bytes.len(),
            format!("{ndims} big-endian u32 sizes ending at byte {header}"),
            format!("end of file after {} bytes", bytes.len()),
        ));
    }
    let dims: Vec<usize> = bytes[4..header]
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let count = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            format_error(
                path,
                4,
                "sizes whose product fits in memory".into(),
                format!("{dims:?}"),
            )
        })?;
    let available = bytes.len() - header;
    if available != count {
        return Err(format_error(
            path,
            header + available.min(count),
            format!("{count} data bytes for sizes {dims:?}"),
            format!("{available} bytes"),
        ));
    }
    Ok((dims, header))
}

/// Reads an IDX file, decompressing it when it starts with the gzip magic `1f 8b`. A gzip
/// file is decoded as a stream into one buffer sized from the gzip trailer, so the peak memory
/// is about the size of the decompressed data.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be read, [`DataError::Format`] for a corrupt gzip
/// stream or IDX content (offsets count decompressed bytes).
pub fn read_idx(path: &Path) -> Result<IdxArray, DataError> {
    use std::io::{Seek, SeekFrom};
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len() as usize;
    let mut magic = [0u8; 2];
    let is_gzip = len >= 2 && {
        file.read_exact(&mut magic).map_err(io)?;
        magic == [0x1f, 0x8b]
    };
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    if !is_gzip {
        let mut raw = Vec::with_capacity(len);
        file.read_to_end(&mut raw).map_err(io)?;
        return parse_idx_owned(raw, path);
    }
    // The gzip trailer stores the uncompressed size mod 2^32: a good capacity hint.
    let mut hint = 0usize;
    if len >= 4 {
        let mut trailer = [0u8; 4];
        file.seek(SeekFrom::End(-4)).map_err(io)?;
        file.read_exact(&mut trailer).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        hint = (u32::from_le_bytes(trailer) as usize)
            .min(len.saturating_mul(1032)) // deflate expands at most ~1032:1
            .min(1 << 30);
    }
    let mut bytes = Vec::with_capacity(hint);
    flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(1 << 16, file))
        .read_to_end(&mut bytes)
        .map_err(|e| {
            format_error(
                path,
                bytes.len(),
                "a valid gzip stream".into(),
                format!("a decompression error ({e})"),
            )
        })?;
    parse_idx_owned(bytes, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IDX file of unsigned bytes with the given sizes and data.
    pub(crate) fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, UNSIGNED_BYTE, dims.len() as u8];
        for d in dims {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn parses_a_well_formed_array() {
        let data: Vec<u8> = (0..24).collect();
        let a = parse_idx(&idx_bytes(&[2, 3, 4], &data), Path::new("x")).unwrap();
        assert_eq!(a.dims, vec![2, 3, 4]);
        assert_eq!(a.data, data);
    }

    #[test]
    fn each_corruption_is_named_with_its_offset() {
        let p = Path::new("images.idx");
        let good = idx_bytes(&[2, 2, 2], &[7; 8]);
        let mut bad_magic = good.clone();
        bad_magic[1] = 3;
        let mut bad_type = good.clone();
        bad_type[2] = 0x0d;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![0, 0], "end of file after 2 bytes"),
            (bad_magic, "00 03"),
            (bad_type, "0x0d"),
            (good[..9].to_vec(), "end of file after 9 bytes"),
            (good[..good.len() - 1].to_vec(), "7 bytes"),
            ([good.clone(), vec![1]].concat(), "9 bytes"),
        ];
        for (bytes, needle) in cases {
            let e = parse_idx(&bytes, p).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains("images.idx") && msg.contains(needle),
                "{needle}: {msg}"
            );
            assert!(matches!(e, DataError::Format { .. }));
        }
    }

    #[test]
    fn reads_raw_and_gzip_files_alike() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("bnn-idx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bytes = idx_bytes(&[3], &[1, 2, 3]);
        let raw = dir.join("a.idx");
        std::fs::write(&raw, &bytes).unwrap();
        let gz = dir.join("a.idx.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&bytes).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        assert_eq!(read_idx(&raw).unwrap(), read_idx(&gz).unwrap());
        // A gzip stream cut in half is an error naming the file, not a short array.
        let full = std::fs::read(&gz).unwrap();
        std::fs::write(&gz, &full[..full.len() / 2]).unwrap();
        let e = read_idx(&gz).unwrap_err().to_string();
        assert!(e.contains("a.idx.gz"), "{e}");
        let missing = read_idx(&dir.join("nope.idx")).unwrap_err();
        assert!(matches!(missing, DataError::Io { .. }));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
