// Reconnection backoff of the page's event streams: 1 s, 2 s, 4 s, 8 s …
// doubling up to 30 s, from the first failure after a stream was open, so
// that a page does not keep knocking on a bridge that is down.

export const firstRetryMs = 1000;
export const maxRetryMs = 30000;

// retryDelay is the wait before attempt n (0 for the first retry).
export function retryDelay(n) {
  return Math.min(firstRetryMs * 2 ** Math.min(n, 15), maxRetryMs);
}
