/** A small in-process cache for data that never changes once written (run tasks, images by SHA-256). */

/** A map that forgets its least recently used entries beyond a budget. */
export class LruCache<V> {
  private readonly map = new Map<string, { value: V; cost: number }>();
  private total = 0;
  constructor(private readonly budget: number, private readonly costOf: (v: V) => number) {}

  get(key: string): V | undefined {
    const hit = this.map.get(key);
    if (!hit) return undefined;
    this.map.delete(key);
    this.map.set(key, hit);
    return hit.value;
  }

  set(key: string, value: V): void {
    const cost = this.costOf(value);
    if (cost > this.budget) return;
    const old = this.map.get(key);
    if (old) this.total -= old.cost;
    this.map.delete(key);
    this.map.set(key, { value, cost });
    this.total += cost;
    for (const [k, v] of this.map) {
      if (this.total <= this.budget) break;
      this.map.delete(k);
      this.total -= v.cost;
    }
  }
}
