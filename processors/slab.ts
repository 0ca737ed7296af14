/**
 * One allocation per packed group.
 *
 * Packing is memory-bound, and on Linux the dominant cost of a fresh output
 * buffer is not the copy but the page faults that zero it on first touch
 * (measured: ~1 µs per 4 KiB page, i.e. slower than the copy itself, and the
 * C allocator hands out fresh pages for anything above 32 MiB). So every
 * large column of a group is carved out of one slab, sized exactly after a
 * planning pass, and a caller that packs many groups can recycle slabs
 * through a `SlabPool` instead of faulting in new memory each time.
 *
 * Views are 8-byte aligned; a PackedField's `values` is then a view with a
 * non-zero `byteOffset` into the shared slab: encoders must use
 * `byteOffset`/`byteLength`, never the whole `.buffer`.
 */
import { TYPED_ARRAY_CLASSES } from './typed-arrays.js';
import type { DType, PackedGroup, TypedArray } from './types.js';


/** Where slabs come from: fresh zeroed memory by default, or a pool. Contents of a returned buffer are unspecified. */
export type SlabSource = (bytes: number) => ArrayBuffer;

export const freshSlab: SlabSource = (bytes) => new ArrayBuffer(bytes);

/** Collects the columns of one group, then carves them out of a single buffer in the same order. */
export class SlabPlan {
  private readonly parts: { dtype: DType; length: number; at: number }[] = [];
  private bytes = 0;

  /** Reserves `length` elements of `dtype`; returns the index of the view in `carve()`'s result. */
  add(dtype: DType, length: number): number {
    this.bytes = Math.ceil(this.bytes / 8) * 8;
    this.parts.push({ dtype, length, at: this.bytes });
    this.bytes += length * TYPED_ARRAY_CLASSES[dtype].BYTES_PER_ELEMENT;
    return this.parts.length - 1;
  }

  get byteLength(): number {
    return this.bytes;
  }

  /** The views, in `add` order, over a buffer of at least `byteLength` bytes taken from `source`. Contents are not cleared. */
  carve(source: SlabSource): TypedArray[] {
    const buffer = source(this.bytes);
    if (buffer.byteLength < this.bytes) throw new Error(`slab of ${buffer.byteLength} bytes, need ${this.bytes}`);
    return this.parts.map((p) => new TYPED_ARRAY_CLASSES[p.dtype](buffer, p.at, p.length));
  }
}

const SLACK = 65536;

/**
 * Recycles slabs between groups. Single-threaded and caller-owned: call
 * `release(packed)` only once nothing reads the packed group any more (after
 * it was encoded), or its values will be overwritten by the next group.
 */
export class SlabPool {
  private free: ArrayBuffer[] = [];
  private retained = 0;
  private readonly issued = new WeakSet<ArrayBuffer>();

  /** @param maxRetainedBytes free slabs kept for reuse, beyond which released slabs are left to the GC. */
  constructor(private readonly maxRetainedBytes = 1024 * 1024 * 1024) {}

  /** A free slab of at least `bytes` and at most 1.5× that plus 64 KiB (so small groups do not pin big slabs), else a new one. */
  readonly source: SlabSource = (bytes) => {
    let best = -1;
    this.free.forEach((b, i) => {
      if (b.byteLength >= bytes && b.byteLength <= bytes * 1.5 + SLACK && (best < 0 || b.byteLength < this.free[best]!.byteLength)) best = i;
    });
    let buffer: ArrayBuffer;
    if (best >= 0) {
      buffer = this.free.splice(best, 1)[0]!;
      this.retained -= buffer.byteLength;
    } else {
      // Rounded up so that slightly larger groups later can reuse it.
      buffer = new ArrayBuffer(Math.ceil((bytes * 1.125) / SLACK) * SLACK);
      this.issued.add(buffer);
    }
    return buffer;
  };

  /** Takes back the slab(s) this pool issued for `packed`; fields from elsewhere are ignored. */
  release(packed: PackedGroup): void {
    const seen = new Set<ArrayBuffer>();
    for (const f of packed.fields) {
      const b = f.values.buffer as ArrayBuffer;
      if (!this.issued.has(b) || seen.has(b) || this.free.includes(b)) continue;
      seen.add(b);
      if (this.retained + b.byteLength > this.maxRetainedBytes) continue;
      this.free.push(b);
      this.retained += b.byteLength;
    }
  }

  /** Bytes currently held for reuse. */
  get retainedBytes(): number {
    return this.retained;
  }
}
