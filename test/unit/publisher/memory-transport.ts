/** An in-memory PublisherTransport for the publisher and produce tests. */
import type { OutgoingRecord, PublisherTransport } from '../../../streams/publish/publisher.js';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import type { RowCompletedEvent } from '../../../streams/codecs/record-mapping.js';

export const codec = new AvroBodyCodec('rowCompleted');

/** Records every send (one array per request) and can be told to fail. */
export class MemoryTransport implements PublisherTransport {
  sends: OutgoingRecord[][] = [];
  closed = false;
  fail: Error | null = null;
  constructor(readonly partitions: number) {}
  async send(records: OutgoingRecord[]): Promise<void> {
    await new Promise((r) => setTimeout(r, 1));
    if (this.fail) throw this.fail;
    this.sends.push(records);
  }
  async close(): Promise<void> {
    this.closed = true;
  }
  get records(): OutgoingRecord[] {
    return this.sends.flat();
  }
  decoded(): Array<RowCompletedEvent & { partition: number; key: string }> {
    return this.records.map((r) => ({ ...codec.decodeBody(r.value), partition: r.partition, key: r.key }));
  }
}
