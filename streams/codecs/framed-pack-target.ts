/**
 * Packing straight into the framed Kafka value (one copy of every byte: the
 * packer's). The packer plans the whole group before writing anything
 * (`PackedLayout`); this target lays out the framed value from that plan —
 * Confluent header, the Avro prefix (group id, sample ids, tags), each
 * field's head, pad and length, exactly as `encodeAlignedPacked` would —
 * and hands the packer a view at each field's 64-byte-aligned place, so
 * when packing returns the value is complete. The bytes equal
 * `encodeFramed` of the same group (test/unit/codec/framed-pack.test.ts).
 *
 * This holds for the `trainer` wire (the default), whose wire dtypes are the
 * trainer dtypes, known before packing. With the `narrow` wire a column's
 * wire dtype — and so its length and the position of every later field —
 * depends on its values (e.g. token ids all below 256 travel as uint8), known
 * only once it is written; `packFramed` then packs into a scratch slab and
 * writes the value in one narrowing pass (still no intermediate narrowed
 * copy), giving the scratch back at once.
 */
import type avro from 'avsc';
import type { PackMemory, PackTarget, PackedLayout } from '../../processors/slab.js';
import { TYPED_ARRAY_CLASSES } from '../../processors/typed-arrays.js';
import type { PackedGroup, TypedArray } from '../../processors/types.js';
import { type PackedWire, fieldHeadToAvro, packedHeaderToAvro } from './packed-mapping.js';
import { type AlignedLayout, type ValueMemory, encodeAlignedPacked, layOutAligned, writeAlignedFrame } from './packed-writer.js';

/** Where framed values are built: a buffer of at least `bytes` (contents unspecified), and back when nobody holds it. `SlabPool` is one. */
export interface ValuePool {
  source: ValueMemory;
  give(buffer: ArrayBuffer): unknown;
}

/** A `PackTarget` whose views are the values' places inside one framed value (trainer wire). */
export class FramedPackTarget implements PackTarget {
  private buffer: ArrayBuffer | null = null;
  private layout: AlignedLayout | null = null;

  constructor(
    private readonly type: avro.Type,
    private readonly schemaId: number,
    private readonly memory: ValueMemory,
  ) {}

  place(layout: PackedLayout): TypedArray[] {
    if (this.buffer !== null) throw new Error('a framed pack target holds one group');
    const aligned = layOutAligned(
      this.type,
      packedHeaderToAvro(layout),
      layout.fields.map((f) => fieldHeadToAvro(f, f.dtype)),
      layout.fields.map((f) => f.length * TYPED_ARRAY_CLASSES[f.dtype].BYTES_PER_ELEMENT),
    );
    const buffer = this.memory(aligned.size);
    if (buffer.byteLength < aligned.size) throw new Error(`value buffer of ${buffer.byteLength} bytes, need ${aligned.size}`);
    this.buffer = buffer;
    this.layout = aligned;
    writeAlignedFrame(new Uint8Array(buffer, 0, aligned.size), aligned, this.schemaId);
    return layout.fields.map((f, i) => new TYPED_ARRAY_CLASSES[f.dtype](buffer, aligned.fields[i]!.at, f.length));
  }

  /** The buffer taken by `place`, if any. */
  get taken(): ArrayBuffer | null {
    return this.buffer;
  }

  /** The framed value: the first `size` bytes of the taken buffer. Complete once the packer returned. */
  value(): Buffer {
    if (this.buffer === null || this.layout === null) throw new Error('nothing was packed into this target');
    return Buffer.from(this.buffer, 0, this.layout.size);
  }
}

/**
 * The framed value of the group `pack` packs, built in memory from `pool`.
 * `pack` receives the output memory to pass to `packGroup` and returns the
 * packed group. Trainer wire: the packer writes into the value itself.
 * Narrow wire: the packer writes a scratch slab from `pool` (given back
 * before returning) and the value is written from it in one pass.
 *
 * The value's buffer stays taken: give it back (`pool.give(value.buffer)`)
 * only once nobody holds the value — for a Kafka value, after its send was
 * acknowledged. If `pack` throws, every buffer taken is given back and the
 * error rethrown.
 */
export function packFramed(type: avro.Type, wire: PackedWire, schemaId: number, pool: ValuePool, pack: (memory: PackMemory) => PackedGroup): Buffer {
  if (wire === 'trainer') {
    const target = new FramedPackTarget(type, schemaId, pool.source);
    try {
      pack(target);
    } catch (e) {
      if (target.taken !== null) pool.give(target.taken);
      throw e;
    }
    return target.value();
  }
  const scratch: ArrayBuffer[] = [];
  try {
    const packed = pack((bytes) => {
      const b = pool.source(bytes);
      scratch.push(b);
      return b;
    });
    return encodeAlignedPacked(type, packed, wire, schemaId, pool.source);
  } finally {
    for (const b of scratch) pool.give(b);
  }
}
