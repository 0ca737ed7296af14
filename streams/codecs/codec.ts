/**
 * Avro codecs for every topic value of SPEC §1, in the Confluent wire format,
 * with schema ids from the registry. `init()` registers the writer schema under
 * `<topic>-value`; after that `encode` is synchronous. `decode` reads the id in
 * the frame, fetches an unknown writer schema once, and resolves it against
 * our reader schema when they differ (schema evolution).
 */
import avro from 'avsc';
import { avroSchema, type RecordKind } from '../../schemas/index.js';
import type { MetricsRecord, PackedGroup } from '../../processors/types.js';
import type { GroupRecord, PenalizedRecord } from './row-refs.js';
import type { DeadLetterRecord } from '../api/dead-letter-record.js';
import type { PackMemory } from '../../processors/slab.js';
import { type ValuePool, packFramed } from './framed-pack-target.js';
import { packedFromAvro, packedToAvro, type PackedWire } from './packed-mapping.js';
import { encodeAlignedPacked } from './packed-writer.js';
import {
  groupFromAvro,
  groupToAvro,
  penalizedFromAvro,
  penalizedToAvro,
  rowCompletedFromAvro,
  rowCompletedToAvro,
  type RowCompletedEvent,
} from './record-mapping.js';
import type { SchemaRegistryClient } from './schema-registry.js';
import { HEADER_BYTES, UndecodableError, readSchemaId, writeHeader } from './wire-format.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
/** Per-codec choices of how values are written (reading accepts every choice). */
export interface CodecOptions {
  /** Element types of packed tensors on the wire (`pack.wire_dtypes`); default `trainer`. */
  packedWire?: PackedWire;
}

interface Mapping<T> {
  toAvro(value: T, options: CodecOptions): any;
  fromAvro(obj: any): T;
}

const identity = { toAvro: (v: any) => v, fromAvro: (o: any) => o };

/** Offsets are strings in memory (never JS numbers in our API) and Avro longs on the wire. */
const deadLetterMapping: Mapping<DeadLetterRecord> = {
  toAvro: ({ weight_version: _wv, ...d }) => ({ ...d, records: d.records.map((r) => ({ ...r, offset: Number(r.offset) })) }),
  fromAvro: (o) => ({ ...o, records: o.records.map((r: any) => ({ ...r, offset: String(r.offset) })) }),
};

export interface RecordTypes {
  rowCompleted: RowCompletedEvent;
  groupComplete: GroupRecord;
  penalized: PenalizedRecord;
  packed: PackedGroup;
  deadLetter: DeadLetterRecord;
  metrics: MetricsRecord & { produced_at: number };
}

const MAPPINGS: { [K in RecordKind]: Mapping<RecordTypes[K]> } = {
  rowCompleted: { toAvro: rowCompletedToAvro, fromAvro: rowCompletedFromAvro },
  groupComplete: { toAvro: groupToAvro, fromAvro: groupFromAvro },
  penalized: { toAvro: penalizedToAvro, fromAvro: penalizedFromAvro },
  packed: { toAvro: (v, o) => packedToAvro(v, o.packedWire), fromAvro: packedFromAvro },
  deadLetter: deadLetterMapping,
  metrics: identity,
};

// A fresh options object per call: avsc stores its type registry in it.
const typeOptions = () => ({ wrapUnions: 'auto' as const });

/** The avsc type of a record kind's current (reader) schema. */
export function avroType(kind: RecordKind): avro.Type {
  return avro.Type.forSchema(avroSchema(kind) as avro.Schema, typeOptions());
}

/** Encodes/decodes the Avro body only (no framing, no registry): used by tests and the JSON tools. */
export class AvroBodyCodec<K extends RecordKind> {
  readonly type: avro.Type;
  private readonly mapping: Mapping<RecordTypes[K]>;

  constructor(
    readonly kind: K,
    readonly options: CodecOptions = {},
  ) {
    this.type = avroType(kind);
    this.mapping = MAPPINGS[kind];
  }

  encodeBody(value: RecordTypes[K]): Buffer {
    return this.type.toBuffer(this.mapping.toAvro(value, this.options));
  }

  /**
   * The Confluent-framed value (header with `schemaId`, then the body). Packed
   * groups are written with every tensor's bytes 64-byte aligned in the value
   * (packed-writer.ts); the body is the same Avro either way.
   */
  encodeFramed(value: RecordTypes[K], schemaId: number): Buffer {
    if (this.kind === 'packed') return encodeAlignedPacked(this.type, value as PackedGroup, this.packedWire, schemaId);
    const body = this.type.toBuffer(this.mapping.toAvro(value, this.options));
    const out = Buffer.allocUnsafe(HEADER_BYTES + body.length);
    writeHeader(out, schemaId);
    body.copy(out, HEADER_BYTES);
    return out;
  }

  /**
   * Packed only: the framed value of the group `pack` packs (`pack` passes
   * the memory it is given to `packGroup`), built in `pool`'s memory with no
   * copy after packing on the trainer wire (framed-pack-target.ts). Same
   * bytes as `encodeFramed` of that group. The value's buffer stays taken
   * until given back to `pool` — only once nobody holds the value any more.
   */
  packFramed(pack: (memory: PackMemory) => PackedGroup, schemaId: number, pool: ValuePool): Buffer {
    if (this.kind !== 'packed') throw new Error(`packFramed is for packed values, not ${this.kind}`);
    return packFramed(this.type, this.packedWire, schemaId, pool, pack);
  }

  private get packedWire(): PackedWire {
    return this.options.packedWire ?? 'trainer';
  }

  /** Decodes `bytes[offset..]` with `resolver` (writer ≠ reader) when given; throws UndecodableError. */
  decodeBody(bytes: Buffer, offset = 0, resolver?: avro.Resolver): RecordTypes[K] {
    let decoded: { value: any; offset: number };
    try {
      decoded = this.type.decode(bytes, offset, resolver);
    } catch (cause) {
      throw new UndecodableError(`not a valid ${this.kind} Avro body: ${(cause as Error).message}`, { cause });
    }
    if (decoded.offset < 0) throw new UndecodableError(`${this.kind} value is truncated`);
    if (decoded.offset !== bytes.length) {
      throw new UndecodableError(`${this.kind} value has ${bytes.length - decoded.offset} trailing bytes`);
    }
    return this.mapping.fromAvro(decoded.value);
  }
}

/** A registry-backed codec for one topic's values. */
export class TopicCodec<K extends RecordKind> extends AvroBodyCodec<K> {
  private writerId = -1;
  private readonly resolvers = new Map<number, avro.Resolver | null>();

  constructor(
    kind: K,
    readonly subject: string,
    private readonly registry: SchemaRegistryClient,
    options: CodecOptions = {},
  ) {
    super(kind, options);
  }

  /** Registers the schema under the subject (idempotent) and remembers its id. */
  async init(): Promise<this> {
    this.writerId = await this.registry.register(this.subject, avroSchema(this.kind));
    this.resolvers.set(this.writerId, null);
    return this;
  }

  get schemaId(): number {
    return this.writerId;
  }

  encode(value: RecordTypes[K]): Buffer {
    if (this.writerId < 0) throw new Error(`codec for ${this.subject} used before init()`);
    return this.encodeFramed(value, this.writerId);
  }

  /** `packFramed` with the registered schema id. */
  packValue(pack: (memory: PackMemory) => PackedGroup, pool: ValuePool): Buffer {
    if (this.writerId < 0) throw new Error(`codec for ${this.subject} used before init()`);
    return this.packFramed(pack, this.writerId, pool);
  }

  /** Decodes a framed value; throws UndecodableError for anything that is not one of ours. */
  async decode(value: Buffer): Promise<RecordTypes[K]> {
    const id = readSchemaId(value);
    let resolver = this.resolvers.get(id);
    if (resolver === undefined) resolver = await this.resolverFor(id);
    return this.decodeBody(value, HEADER_BYTES, resolver ?? undefined);
  }

  private async resolverFor(id: number): Promise<avro.Resolver | null> {
    const writer = avro.Type.forSchema((await this.registry.schemaById(id)) as avro.Schema, typeOptions());
    let resolver: avro.Resolver | null;
    try {
      resolver = writer.equals(this.type) ? null : this.type.createResolver(writer);
    } catch (cause) {
      throw new UndecodableError(`writer schema ${id} cannot be read as ${this.kind}: ${(cause as Error).message}`, { cause });
    }
    this.resolvers.set(id, resolver);
    return resolver;
  }
}
