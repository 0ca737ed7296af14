/**
 * Splitting one transaction's messages into produce requests that stay under
 * the broker's request size (socket.request.max.bytes = 2 × message.max.bytes
 * in our broker config): each chunk carries at most `maxMessageBytes` bytes of
 * values, or a single message.
 */
export function splitBySize<T extends { message: { value: Buffer | null } }>(items: T[], maxMessageBytes: number): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = (item.message.value?.length ?? 0) + 256;
    if (current.length > 0 && bytes + size > maxMessageBytes) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
