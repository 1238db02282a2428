/**
 * SHA-256 (FIPS 180-4) as a streaming hasher over text, pure TypeScript so the domain needs no
 * platform import: `update` any number of times, then `hex` once. Memory is constant (one 64-byte
 * block and the state), whatever the amount of text fed.
 */

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2
])

const rotr = (x: number, n: number) => (x >>> n) | (x << (32 - n))

const encoder = new TextEncoder()

export class Sha256 {
  private readonly h = new Uint32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
  ])
  private readonly block = new Uint8Array(64)
  private readonly w = new Uint32Array(64)
  private used = 0
  /** Bytes fed so far. */
  private length = 0
  private done = false

  /** Feeds the UTF-8 bytes of `text`. */
  update(text: string): this {
    return this.updateBytes(encoder.encode(text))
  }

  updateBytes(bytes: Uint8Array): this {
    if (this.done) throw new Error("Sha256: update after hex()")
    this.length += bytes.length
    let i = 0
    while (i < bytes.length) {
      const take = Math.min(64 - this.used, bytes.length - i)
      this.block.set(bytes.subarray(i, i + take), this.used)
      this.used += take
      i += take
      if (this.used === 64) {
        this.compress()
        this.used = 0
      }
    }
    return this
  }

  /** The digest as 64 lower-case hex characters; the hasher is finished afterwards. */
  hex(): string {
    if (!this.done) {
      const bits = this.length * 8
      this.block[this.used++] = 0x80
      if (this.used > 56) {
        this.block.fill(0, this.used)
        this.compress()
        this.used = 0
      }
      this.block.fill(0, this.used, 56)
      const hi = Math.floor(bits / 0x100000000)
      const lo = bits >>> 0
      for (let b = 0; b < 4; b++) {
        this.block[56 + b] = (hi >>> (24 - 8 * b)) & 0xff
        this.block[60 + b] = (lo >>> (24 - 8 * b)) & 0xff
      }
      this.compress()
      this.done = true
    }
    let out = ""
    for (const word of this.h) out += word.toString(16).padStart(8, "0")
    return out
  }

  private compress(): void {
    const w = this.w
    const b = this.block
    for (let t = 0; t < 16; t++) {
      w[t] = (b[4 * t]! << 24) | (b[4 * t + 1]! << 16) | (b[4 * t + 2]! << 8) | b[4 * t + 3]!
    }
    for (let t = 16; t < 64; t++) {
      const x = w[t - 15]!
      const y = w[t - 2]!
      const s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3)
      const s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10)
      w[t] = (w[t - 16]! + s0 + w[t - 7]! + s1) | 0
    }
    const h = this.h
    let a = h[0]!
    let bb = h[1]!
    let c = h[2]!
    let d = h[3]!
    let e = h[4]!
    let f = h[5]!
    let g = h[6]!
    let hh = h[7]!
    for (let t = 0; t < 64; t++) {
      const s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
      const ch = (e & f) ^ (~e & g)
      const t1 = (hh + s1 + ch + K[t]! + w[t]!) | 0
      const s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
      const maj = (a & bb) ^ (a & c) ^ (bb & c)
      const t2 = (s0 + maj) | 0
      hh = g
      g = f
      f = e
      e = (d + t1) | 0
      d = c
      c = bb
      bb = a
      a = (t1 + t2) | 0
    }
    h[0] = (h[0]! + a) | 0
    h[1] = (h[1]! + bb) | 0
    h[2] = (h[2]! + c) | 0
    h[3] = (h[3]! + d) | 0
    h[4] = (h[4]! + e) | 0
    h[5] = (h[5]! + f) | 0
    h[6] = (h[6]! + g) | 0
    h[7] = (h[7]! + hh) | 0
  }
}

/** The SHA-256 of a text's UTF-8 bytes, as hex. */
export const sha256Hex = (text: string): string => new Sha256().update(text).hex()
