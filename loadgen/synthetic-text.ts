/**
 * Filler text for prompts, reasoning summaries, answers and tool outputs.
 *
 * Real `full_result`s carry the model's text (about four characters per
 * token), and that text is a large share of a row's bytes; payload sizes
 * and compression ratios measured on the load generator are only honest if
 * the text is there. Building it word by word per row would dominate the
 * generator's cost, so every text is a slice of one fixed corpus, built
 * once, starting at a random word boundary.
 */
import { Rng } from './random.js';

const WORDS = (
  'the a of to and is in that we let so then thus therefore since because if for each with this value sum ' +
  'number integer prime factor divide equation solve check compute result answer step first next finally ' +
  'function call return list index array loop query tool output file path error test pass fail retry ' +
  'consider case assume suppose note observe hence given find show prove total count term series limit ' +
  'matrix vector angle triangle circle area length ratio probability expected variance mean median mode ' +
  'wait actually hmm okay right good yes no maybe correct wrong simplify expand substitute verify'
).split(' ');

const CORPUS_CHARS = 1 << 15;

/** The corpus and the offsets where its words start (built once, deterministically). */
const corpus = (() => {
  const rng = new Rng(0x7e57);
  const parts: string[] = [];
  const starts: number[] = [];
  let length = 0;
  while (length < CORPUS_CHARS) {
    const w = rng.pick(WORDS);
    starts.push(length);
    // An occasional sentence break keeps the text from being one run-on line.
    const word = rng.float() < 0.08 ? `${w}.` : w;
    parts.push(word);
    length += word.length + 1;
  }
  return { text: parts.join(' ') + ' ', starts: Int32Array.from(starts) };
})();

/**
 * About `chars` characters of filler text (exactly `chars` unless `chars` ≤ 0,
 * which gives `''`). The text starts at a word, so any text of two or more
 * characters is non-empty after trimming. It never contains angle brackets,
 * so it never contains a think tag by accident.
 */
export function syntheticText(rng: Rng, chars: number): string {
  if (chars <= 0) return '';
  const start = corpus.starts[rng.int(0, corpus.starts.length)] as number;
  const { text } = corpus;
  if (start + chars <= text.length) return text.slice(start, start + chars);
  let out = text.slice(start);
  while (out.length < chars) out += text;
  return out.slice(0, chars);
}
