/**
 * A schema registry that lives in memory (the topology test driver's): ids
 * are handed out from 1 in registration order, one per distinct schema,
 * whatever the subject, as a registry does; an unknown id is undecodable.
 * It stands in for `SchemaRegistryClient` where codecs need one and no
 * registry runs (the real-registry tests live in test/integration/).
 */
import type { SchemaRegistryClient } from '../codecs/schema-registry.js';
import { UndecodableError } from '../codecs/wire-format.js';

export class MemoryRegistry {
  private readonly byId = new Map<number, object>();
  private readonly idByText = new Map<string, number>();
  /** Subject → the ids registered under it, oldest first. */
  readonly subjects = new Map<string, number[]>();

  async register(subject: string, schema: object): Promise<number> {
    const text = JSON.stringify(schema);
    let id = this.idByText.get(text);
    if (id === undefined) {
      id = this.byId.size + 1;
      this.idByText.set(text, id);
      this.byId.set(id, schema);
    }
    const ids = this.subjects.get(subject) ?? [];
    if (!ids.includes(id)) this.subjects.set(subject, [...ids, id]);
    return id;
  }

  async schemaById(id: number): Promise<object> {
    const schema = this.byId.get(id);
    if (!schema) throw new UndecodableError(`schema id ${id} is not registered`);
    return schema;
  }

  /** This registry where a codec wants the real client (only `register` and `schemaById` are ever called). */
  asClient(): SchemaRegistryClient {
    return this as unknown as SchemaRegistryClient;
  }
}
