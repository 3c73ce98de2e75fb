//! The counter-based generator of the fused kernels: Philox4x32-10 (Salmon et al. 2011,
//! "Parallel random numbers: as easy as 1, 2, 3") and the Box–Muller transform.
//!
//! Element `i` of the stream with key `k` is a pure function of `(k, i)`: a backward pass can
//! regenerate the `ε` of its forward pass instead of storing it, parallel chunks need no shared
//! state, and the numbers do not depend on the thread count. Block `j` (elements `64j..64j+64`)
//! takes 16 Philox outputs of counters `16j..16j+16`; each gives two uniform pairs, each pair
//! two normals (`r cos θ`, `r sin θ`; the cosines of a half-block first, then its sines).

// Fixed-size block loops index several arrays at once: that is what LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use crate::simd::{BLOCK, ln, sincos_2pi};

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox4x32 with 10 rounds: the 128-bit block of `counter` under `key`.
#[inline(always)]
pub fn philox(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let [mut x0, mut x1, mut x2, mut x3] = counter;
    let [mut k0, mut k1] = key;
    for _ in 0..10 {
        let p0 = M0 as u64 * x0 as u64;
        let p1 = M1 as u64 * x2 as u64;
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        x0 = hi1 ^ x1 ^ k0;
        x1 = lo1;
        x2 = hi0 ^ x3 ^ k1;
        x3 = lo0;
        k0 = k0.wrapping_add(W0);
        k1 = k1.wrapping_add(W1);
    }
    [x0, x1, x2, x3]
}

/// The Philox key of a 64-bit stream key.
#[inline(always)]
pub fn key_words(key: u64) -> [u32; 2] {
    [key as u32, (key >> 32) as u32]
}

/// The 64 standard normals of block `block` of sub-stream `stream` of `key`.
#[inline(always)]
pub fn normal_block(key: [u32; 2], stream: u32, block: u64, out: &mut [f32; BLOCK]) {
    // bits[w][j]: word w of the Philox output of counter 16·block + j.
    let mut bits = [[0u32; 16]; 4];
    for j in 0..16 {
        let c = block * 16 + j as u64;
        let r = philox([c as u32, (c >> 32) as u32, stream, 0], key);
        for w in 0..4 {
            bits[w][j] = r[w];
        }
    }
    let (low, high) = out.split_at_mut(BLOCK / 2);
    box_muller(&bits[0], &bits[1], low);
    box_muller(&bits[2], &bits[3], high);
}

/// 32 normals from 16 pairs of words: `out[p] = r_p cos θ_p`, `out[16 + p] = r_p sin θ_p`,
/// `r = √(−2 ln u₁)`, `θ = 2πu₂`. Two loops of 16 lanes with contiguous stores: what LLVM keeps
/// vectorised.
#[inline(always)]
fn box_muller(a: &[u32; 16], b: &[u32; 16], out: &mut [f32]) {
    const TO_UNIT: f32 = 1.0 / 16_777_216.0; // 2⁻²⁴
    let out: &mut [f32; 32] = out.try_into().expect("32 outputs");
    for p in 0..16 {
        // Below 2²⁴ + 1: exact as f32, and a signed conversion (x86 has no unsigned one).
        let u1 = ((a[p] >> 8) + 1) as i32 as f32 * TO_UNIT; // (0, 1]: ln u1 is finite
        let u2 = (b[p] >> 8) as i32 as f32 * TO_UNIT; // [0, 1)
        let r = (-2.0 * ln(u1)).sqrt();
        let (s, c) = sincos_2pi(u2);
        out[p] = r * c;
        out[16 + p] = r * s;
    }
}

/// The 64 uniform words of block `block` of `key`'s mask stream (dropout): element `j` of the
/// block is word `j / 16` of the Philox output of counter `16·block + j % 16` (tag 2 in the
/// counter's last word keeps it apart from the normals' and the signs' counters).
#[inline(always)]
pub fn mask_words(key: [u32; 2], block: u64, out: &mut [u32; BLOCK]) {
    for j in 0..16 {
        let c = block * 16 + j as u64;
        let r = philox([c as u32, (c >> 32) as u32, 0, 2], key);
        for w in 0..4 {
            out[16 * w + j] = r[w];
        }
    }
}

/// The 128 sign bits of word `word` of stream `key`: group `i`'s sign is bit `i % 128` of word
/// `i / 128` ([`sign_of`]).
#[inline(always)]
pub fn sign_bits(key: [u32; 2], word: u64) -> [u32; 4] {
    philox([word as u32, (word >> 32) as u32, 0, 1], key)
}

/// `±1` from bit `i` (`< 128`) of `bits`: `+1` when it is set.
#[inline(always)]
pub fn sign_of(bits: &[u32; 4], i: usize) -> f32 {
    if (bits[i / 32] >> (i % 32)) & 1 == 1 {
        1.0
    } else {
        -1.0
    }
}

/// SplitMix64 finaliser: decorrelates consecutive integers into stream keys.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_published_known_answers() {
        // Random123's kat_vectors for philox4x32_10.
        assert_eq!(
            philox([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }
}
