/** Plain-text tables for the operations commands' human output. */

/** Left-aligned columns separated by two spaces, a dashed rule under the header; `right` lists right-aligned column indices. */
export function formatTable(header: string[], rows: Array<Array<string | number>>, right: number[] = []): string {
  const cells = rows.map((r) => r.map((c) => String(c)));
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (right.includes(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n') + '\n';
}

/** Shortens `text` to `max` characters with an ellipsis. */
export function truncate(text: string, max: number): string {
  const oneLine = text.replace(/\s+/g, ' ');
  return oneLine.length <= max ? oneLine : `${oneLine.slice(0, Math.max(0, max - 1))}…`;
}
