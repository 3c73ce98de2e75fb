//! Files that can be trusted after a crash: written whole or not at all, and checked on load.
//! [`Digest`] is a 64-bit checksum (it detects damage, not tampering); [`seal_bytes`] /
//! [`open_bytes`] seal a binary file with a checksum trailer (burnpack files keep loading in
//! burn's loader); [`seal_json`] / [`open_json`] a JSON object whose last member is its checksum;
//! [`write_atomic`] writes a temporary file, syncs it and renames it over the target. More: the
//! book's *Callbacks and resume* page.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A 64-bit checksum of a byte stream (see the module docs). Words of 8 bytes, little endian,
/// go through `s ← rotl((s ⊕ w)·K, 29)`; the tail and the length through a final mix.
#[derive(Debug, Clone)]
pub struct Digest {
    state: u64,
    len: u64,
    tail: [u8; 8],
    tail_len: usize,
}

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl Default for Digest {
    fn default() -> Self {
        Self::new()
    }
}

impl Digest {
    /// An empty digest.
    pub fn new() -> Self {
        Self {
            state: 0x243f_6a88_85a3_08d3,
            len: 0,
            tail: [0; 8],
            tail_len: 0,
        }
    }

    fn word(&mut self, w: u64) {
        self.state = ((self.state ^ w).wrapping_mul(K)).rotate_left(29);
    }

    /// Adds `bytes`.
    pub fn update(&mut self, mut bytes: &[u8]) -> &mut Self {
        self.len = self.len.wrapping_add(bytes.len() as u64);
        if self.tail_len > 0 {
            let take = (8 - self.tail_len).min(bytes.len());
            self.tail[self.tail_len..self.tail_len + take].copy_from_slice(&bytes[..take]);
            self.tail_len += take;
            bytes = &bytes[take..];
            if self.tail_len < 8 {
                return self;
            }
            self.word(u64::from_le_bytes(self.tail));
            self.tail_len = 0;
        }
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.word(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        self.tail[..rest.len()].copy_from_slice(rest);
        self.tail_len = rest.len();
        self
    }

    /// Adds a string, prefixed by its length (so `("ab", "c")` and `("a", "bc")` differ).
    pub fn text(&mut self, s: &str) -> &mut Self {
        self.number(s.len() as u64).update(s.as_bytes())
    }

    /// Adds a number.
    pub fn number(&mut self, v: u64) -> &mut Self {
        self.update(&v.to_le_bytes())
    }

    /// Adds floats by their bit patterns (so `-0.0` and `0.0`, or two NaNs, may differ).
    pub fn floats(&mut self, values: &[f64]) -> &mut Self {
        self.number(values.len() as u64);
        for v in values {
            self.update(&v.to_bits().to_le_bytes());
        }
        self
    }

    /// The checksum of everything added so far.
    pub fn value(&self) -> u64 {
        let mut s = self.state;
        if self.tail_len > 0 {
            let mut last = [0u8; 8];
            last[..self.tail_len].copy_from_slice(&self.tail[..self.tail_len]);
            s = ((s ^ u64::from_le_bytes(last)).wrapping_mul(K)).rotate_left(29);
        }
        // The length, then murmur3's 64-bit finaliser (a bijection).
        s ^= self.len.wrapping_mul(0xff51_afd7_ed55_8ccd);
        s ^= s >> 33;
        s = s.wrapping_mul(0xff51_afd7_ed55_8ccd);
        s ^= s >> 33;
        s = s.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        s ^ (s >> 33)
    }

    /// [`Digest::value`] as 16 lower-case hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.value())
    }

    /// The checksum of `bytes`.
    pub fn of(bytes: &[u8]) -> u64 {
        Digest::new().update(bytes).value()
    }
}

/// Why a sealed file could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntegrityError {
    /// The checksum the file carries is not the checksum of its content.
    #[error(
        "the file is damaged or was changed after it was written: its content's checksum is \
         {found}, the one saved with it {saved}"
    )]
    Damaged {
        /// The checksum saved in the file.
        saved: String,
        /// The checksum of the content as read.
        found: String,
    },
    /// The file carries no checksum where one belongs.
    #[error("it carries no checksum: it was cut short, or was not written by this library{0}")]
    Unsealed(&'static str),
    /// The file was sealed by a newer version of the format than this library reads.
    #[error(
        "it was written in format version {found}, newer than the version {known} this \
         library reads: load it with the newer version of the library that wrote it"
    )]
    Newer {
        /// The file's format version.
        found: u16,
        /// The newest version this library reads.
        known: u16,
    },
}

/// What ends a sealed binary file: 8 bytes of magic (6 of name, a big-endian format version),
/// the content's digest, its length.
const MAGIC: &[u8; 8] = b"bnnsum\x00\x01";
const TRAILER: usize = 24;

/// `content` with its checksum trailer appended ([`open_bytes`] takes it off again).
pub fn seal_bytes(mut content: Vec<u8>) -> Vec<u8> {
    let digest = Digest::of(&content);
    let len = content.len() as u64;
    content.extend_from_slice(MAGIC);
    content.extend_from_slice(&digest.to_le_bytes());
    content.extend_from_slice(&len.to_le_bytes());
    content
}

/// The content of a file sealed by [`seal_bytes`], checked against its trailer.
///
/// # Errors
/// [`IntegrityError::Unsealed`] without a trailer (or with a length that does not fit),
/// [`IntegrityError::Damaged`] when the content's checksum differs from the saved one.
pub fn open_bytes(sealed: &[u8]) -> Result<&[u8], IntegrityError> {
    let unsealed = IntegrityError::Unsealed("");
    let Some(at) = sealed.len().checked_sub(TRAILER) else {
        return Err(unsealed);
    };
    let (content, trailer) = sealed.split_at(at);
    if trailer[..6] == MAGIC[..6] {
        let version = |b: &[u8]| u16::from_be_bytes([b[6], b[7]]);
        let (found, known) = (version(trailer), version(MAGIC));
        if found > known {
            return Err(IntegrityError::Newer { found, known });
        }
    }
    if &trailer[..8] != MAGIC {
        return Err(unsealed);
    }
    let saved = u64::from_le_bytes(trailer[8..16].try_into().expect("8 bytes"));
    let len = u64::from_le_bytes(trailer[16..24].try_into().expect("8 bytes"));
    let found = Digest::of(content);
    if len != content.len() as u64 || found != saved {
        return Err(IntegrityError::Damaged {
            saved: format!("{saved:016x}"),
            found: format!("{found:016x}"),
        });
    }
    Ok(content)
}

/// The member [`seal_json`] appends: `,\n  "checksum": "` + 16 hex digits + `"\n}`.
const JSON_KEY: &str = ",\n  \"checksum\": \"";

/// `value` (a JSON object) as pretty-printed JSON whose last member, `"checksum"`, is the
/// digest of the text without it. Other readers see an ordinary member.
///
/// # Panics
/// When `value` is not an object, or already has a member named `checksum`.
pub fn seal_json(value: &serde_json::Value) -> String {
    let object = value.as_object().expect("seal_json: a JSON object");
    assert!(
        !object.contains_key("checksum") && !object.is_empty(),
        "seal_json: a non-empty object without a `checksum` member"
    );
    let text = serde_json::to_string_pretty(value).expect("a JSON value serialises");
    let body = text
        .strip_suffix("\n}")
        .expect("pretty JSON objects end in \"\\n}\"");
    format!(
        "{body}{JSON_KEY}{}\"\n}}\n",
        Digest::new().update(text.as_bytes()).hex()
    )
}

/// The object of a text sealed by [`seal_json`], its checksum checked and its `checksum`
/// member removed.
///
/// # Errors
/// [`IntegrityError::Unsealed`] when the text does not end in a checksum member (a file cut
/// short, or one written by hand or by another program), [`IntegrityError::Damaged`] when the
/// checksum differs. Text that is not JSON after all is reported as damaged too.
pub fn open_json(text: &str) -> Result<serde_json::Value, IntegrityError> {
    let unsealed = IntegrityError::Unsealed(" (or was written by hand or by another program)");
    let end = text.strip_suffix('\n').unwrap_or(text);
    let Some(rest) = end.strip_suffix("\"\n}") else {
        return Err(unsealed);
    };
    let Some(at) = rest.rfind(JSON_KEY) else {
        return Err(unsealed);
    };
    let saved = &rest[at + JSON_KEY.len()..];
    if saved.len() != 16 || !saved.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(unsealed);
    }
    let original = format!("{}\n}}", &rest[..at]);
    let found = Digest::new().update(original.as_bytes()).hex();
    if found != saved {
        return Err(IntegrityError::Damaged {
            saved: saved.to_string(),
            found,
        });
    }
    serde_json::from_str(&original).map_err(|_| IntegrityError::Damaged {
        saved: saved.to_string(),
        found,
    })
}

/// Writes `bytes` to `path` whole: a temporary file in the same folder (so the rename cannot
/// cross file systems), flushed to the disk, then renamed over `path`. A failure (a full disk
/// among them) removes the temporary file and leaves whatever `path` held before.
///
/// # Errors
/// The I/O error, with `path` named in its message.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let named = |e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("{}: cannot write: {e}", path.display()))
    };
    let temp = temporary_beside(path);
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(named(e));
    }
    std::fs::rename(&temp, path).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        named(e)
    })
}

/// A name beside `path` that no other writer (thread or process) uses at the same time.
fn temporary_beside(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_single_byte_change_changes_the_digest() {
        let bytes: Vec<u8> = (0..203u32).map(|i| (i * 37 % 251) as u8).collect();
        let base = Digest::of(&bytes);
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert_ne!(Digest::of(&b), base, "byte {i} bit {bit}");
            }
        }
        // Cut short, or one byte longer.
        assert_ne!(Digest::of(&bytes[..202]), base);
        let mut longer = bytes.clone();
        longer.push(0);
        assert_ne!(Digest::of(&longer), base);
        // Fed in pieces of any size: the same digest.
        for piece in [1, 3, 7, 8, 9, 64] {
            let mut d = Digest::new();
            for c in bytes.chunks(piece) {
                d.update(c);
            }
            assert_eq!(d.value(), base, "pieces of {piece}");
        }
        let (mut a, mut b) = (Digest::new(), Digest::new());
        a.text("ab").text("c");
        b.text("a").text("bc");
        assert_ne!(a.value(), b.value());
    }

    #[test]
    fn sealed_bytes_open_and_any_damage_is_named() {
        let content: Vec<u8> = (0..100u8).collect();
        let sealed = seal_bytes(content.clone());
        assert_eq!(open_bytes(&sealed).unwrap(), &content[..]);
        for i in 0..sealed.len() {
            let mut b = sealed.clone();
            b[i] ^= 0x10;
            assert!(open_bytes(&b).is_err(), "byte {i}");
        }
        assert!(matches!(
            open_bytes(&sealed[..sealed.len() - 1]),
            Err(IntegrityError::Unsealed(_))
        ));
        assert!(matches!(
            open_bytes(&content),
            Err(IntegrityError::Unsealed(_))
        ));
        let mut flipped = sealed.clone();
        flipped[5] ^= 1;
        let err = open_bytes(&flipped).unwrap_err().to_string();
        assert!(err.contains("damaged"), "{err}");
    }

    #[test]
    fn sealed_json_stays_json_and_any_change_is_found() {
        let value = serde_json::json!({ "a": 1.5, "rows": [1, 2, 3], "name": "x\"y" });
        let text = seal_json(&value);
        // Plain JSON for any reader, with the checksum as one more member.
        let plain: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(plain["checksum"].as_str().unwrap().len(), 16);
        assert_eq!(open_json(&text).unwrap(), value);
        // Every one-character change is found (in a digit, a quote, the checksum itself).
        for (i, c) in text.char_indices() {
            let other = if c == '1' { '2' } else { '1' };
            let changed = format!("{}{other}{}", &text[..i], &text[i + c.len_utf8()..]);
            assert!(open_json(&changed).is_err(), "at {i}: {changed}");
        }
        // Cut short, or written without a checksum.
        assert!(matches!(
            open_json(&text[..text.len() - 8]),
            Err(IntegrityError::Unsealed(_))
        ));
        let unsealed = serde_json::to_string_pretty(&value).unwrap();
        assert!(matches!(
            open_json(&unsealed),
            Err(IntegrityError::Unsealed(_))
        ));
    }

    #[test]
    fn atomic_writes_replace_whole_files_and_leave_no_temporary_behind() {
        let dir = std::env::temp_dir().join(format!("bnn-atomic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("record.json");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        // A folder that does not exist: the error names the target.
        let err = write_atomic(&dir.join("no/such.json"), b"x").unwrap_err();
        assert!(err.to_string().contains("no/such.json"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
