/**
 * Tiny real images for fixtures: a minimal PNG encoder (node:zlib + CRC-32) and a known-good 8x8
 * baseline JPEG (made once with Pillow, checked to decode with `PIL.Image.open(...).load()`).
 */
import { encodePng, type Rgb } from '../../src/demo/png.ts';

export { crc32, encodePng, type Rgb } from '../../src/demo/png.ts';

/** A small PNG whose pixels depend on `seed`, so different seeds give different files. */
export function fixturePng(seed: number, size = 6): Uint8Array {
  const base: Rgb = [(seed * 53) % 256, (seed * 97 + 40) % 256, (seed * 31 + 200) % 256];
  return encodePng(size, size, (x, y) => ((x + y + seed) % 3 === 0 ? [255 - base[0], 255 - base[1], 255 - base[2]] : base));
}

const JPEG_8X8_HEX =
  'ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a181616183123251d283a' +
  '333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c656763ffdb0043011112121815182f1a1a2f' +
  '63423842636363636363636363636363636363636363636363636363636363636363636363636363636363636363636363636363' +
  '6363ffc00011080008000803012200021101031101ffc4001f000001050101010101010000000000000000010203040506070809' +
  '0a0bffc400b5100002010303020403050504040000017d01020300041105122131410613516107227114328191a1082342b1c115' +
  '52d1f02433627282090a161718191a25262728292a3435363738393a434445464748494a535455565758595a636465666768696a' +
  '737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9ca' +
  'd2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffc4001f01000301010101010101010100000000000001' +
  '02030405060708090a0bffc400b51100020102040403040705040400010277000102031104052131061241510761711322328108' +
  '144291a1b1c109233352f0156272d10a162434e125f11718191a262728292a35363738393a434445464748494a53545556575859' +
  '5a636465666768696a737475767778797a82838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9' +
  'bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9faffda000c03010002110311003f00cd' +
  '66dd8e28a28ae59ce5525cd2dcfa2a54a14a0a105648ffd9';

/** The known-good 8x8 baseline JPEG (648 bytes). */
export const FIXTURE_JPEG: Uint8Array = new Uint8Array(Buffer.from(JPEG_8X8_HEX, 'hex'));

/**
 * A valid JPEG that differs per `label`: the base JPEG with a COM (comment) segment after its
 * JFIF (APP0) header, which decoders skip.
 */
export function fixtureJpeg(label: string): Uint8Array {
  const text = Buffer.from(label, 'utf8');
  const com = Buffer.alloc(4 + text.length);
  com.set([0xff, 0xfe], 0);
  com.writeUInt16BE(text.length + 2, 2);
  text.copy(com, 4);
  const afterApp0 = 4 + ((FIXTURE_JPEG[4] << 8) | FIXTURE_JPEG[5]); // SOI (2) + APP0 marker (2) + its length
  return new Uint8Array(Buffer.concat([FIXTURE_JPEG.subarray(0, afterApp0), com, FIXTURE_JPEG.subarray(afterApp0)]));
}
