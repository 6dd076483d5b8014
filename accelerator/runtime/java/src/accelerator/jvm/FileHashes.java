package accelerator.jvm;


/**
 * The 128-bit hash of one listed file (its path string, size, modification time and deletion
 * vector: what its listing line says) and the fingerprint of a listing made of them: the
 * file count and the sums of the hashes' two 64-bit halves (modulo 2^64), so the fingerprint
 * does not depend on the files' order and follows a listing's changes by adding and
 * subtracting hashes. Two listings of different files share a fingerprint only if their hash
 * sums collide (about 2^-128 for hashes that behave randomly). The prefix {@value #SCHEME}
 * tells these fingerprints from the SHA-256 of sorted lines older index versions recorded.
 */
final class FileHashes {
  /** How fingerprints of this kind begin. */
  static final String SCHEME = "h128:";
  private static final long SEED_HIGH = 0x9E3779B97F4A7C15L;
  private static final long SEED_LOW = 0xC2B2AE3D27D4EB4FL;
  private static final long MULTIPLIER_HIGH = 0x100000001B3L;          // FNV-1a's prime
  private static final long MULTIPLIER_LOW = 0xFF51AFD7ED558CCDL | 1L;

  private FileHashes() {
  }

  /** Sets {@code high[i]} and {@code low[i]} to the hash of one file. */
  static void hash(String path, long size, long mtime, String deletionVector, long[] high,
      long[] low, int i) {
    long h = SEED_HIGH;
    long l = SEED_LOW;
    for (int k = 0; k < path.length(); k++) {
      char c = path.charAt(k);
      h = (h ^ c) * MULTIPLIER_HIGH;
      l = (Long.rotateLeft(l, 23) ^ c) * MULTIPLIER_LOW;
    }
    h = mix(h ^ path.length()) + mix(size ^ SEED_LOW);
    l = mix(l ^ Long.reverse(path.length())) + mix(mtime ^ SEED_HIGH);
    h = mix(h + Long.rotateLeft(mtime, 17));
    l = mix(l + Long.rotateLeft(size, 29));
    if (deletionVector != null) {
      long d = SEED_HIGH ^ SEED_LOW;
      for (int k = 0; k < deletionVector.length(); k++) {
        d = (d ^ deletionVector.charAt(k)) * MULTIPLIER_LOW;
      }
      h = mix(h ^ mix(d));
      l = mix(l + mix(d ^ deletionVector.length()));
    }
    high[i] = mix(h + l);
    low[i] = mix(l ^ Long.rotateLeft(h, 31));
  }

  /** The fingerprint of the files whose hashes {@code high} and {@code low} hold. */
  static String fingerprint(long[] high, long[] low) {
    long h = 0;
    long l = 0;
    for (int i = 0; i < high.length; i++) {
      h += high[i];
      l += low[i];
    }
    return String.format("%s%d:%016x%016x", SCHEME, high.length, h, l);
  }

  /** MurmurHash3's 64-bit finalizer: every input bit flips each output bit with odds 1/2. */
  private static long mix(long k) {
    k ^= k >>> 33;
    k *= 0xFF51AFD7ED558CCDL;
    k ^= k >>> 33;
    k *= 0xC4CEB9FE1A85EC53L;
    k ^= k >>> 33;
    return k;
  }
}
