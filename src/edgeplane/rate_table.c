/* edgeplane.rate_table: the node's rate limiting counters, one table in shared memory for all its edge workers.

   Why in C: a rate limiting rule counts every request of its zone, and the count must be the node's, not a
   worker's (four workers let through ``requests_per_period``, not four times it). The counters therefore live in
   one shared mapping (an ``mmap`` of a memfd, ``rate_counters.py``) and are changed by several processes at once,
   which needs atomic compare-and-swap on that memory. No Python library offers cross-process atomics on a mapping
   at a per-request cost of about a microsecond (``multiprocessing``'s locks are semaphores, a system call each
   when contended, and Python cannot keep a compound update of a slot atomic across processes at all).

   The layout, in the caller's writable buffer (``layout_size(slots)`` bytes; all numbers in the machine's order):

     header, 64 bytes:  magic u64 | version u32 | reserved u32 | slot count u64 | SipHash key 16 bytes |
                        evictions u64 | saturations u64 | reserved u64
     buckets:           slot count / 8 buckets of 8 slots of 64 bytes (each slot one cache line):
                        key hash u64 | rule u32 | period ms u32 | window start ms i64 | current count u64 |
                        previous count u64 | blocked until ms i64 | last touch ms i64 | limit u32 | lock u32

   A slot is in use when its period is not 0; it is free again once its last touch is two periods old and its block
   (if any) has ended: both of its windows have then passed. ``limit`` is the rule's limit when last counted
   (saturated at 2^32 - 1), kept only to rank slots for eviction. ``lock`` is used in the first slot of each
   bucket only: the bucket's spinlock, 0 when free, else the owner's monotonic clock in ms (mod 2^32, never 0). A
   lock held longer than TAKEOVER_MS is taken over, so a worker killed inside the few instructions of a bucket's
   update cannot freeze the node's counting; the price is that a live owner preempted for that long inside its
   update races with the taker (one count may be lost or doubled). The lock always uses the machine's clock; the
   counting uses the ``now_ms`` its callers give, so that tests control time, and a ``now_ms`` of 2^63 - 1 is
   the machine's monotonic clock read here (the edge's case: a clock read in C costs a fraction of one in Python).

   Keys: SipHash-2-4 under the table's key over the rule id (u32 little-endian) and each characteristic value as a
   tag byte (1 text, as UTF-8; 2 bytes), its length (u64 little-endian) and its bytes: the length prefix keeps
   ("ab", "c") and ("a", "bc") apart. A key is its 64-bit hash and rule id (two keys colliding in 64 bits share a
   counter); its bucket is hash mod buckets.

   Counting is the sliding window estimate of approximate counting: windows are aligned to the period, a slot holds
   the current and the previous window's counts, and a request at ``elapsed`` ms into the current window sees
   ``previous * (period - elapsed) / period + current``; it is over the limit when
   ``previous * (period - elapsed) + (current + amount) * period > limit * period`` (integers, 128 bits). Within
   one aligned window no more than ``limit`` is let through, and over any span of one period no more than twice
   ``limit`` (``tests/test_rate_counters.py`` holds both as properties). Counts saturate at 2^64 - 1.

   The calls (times in ms, all given): ``acquire`` checks and counts at once: 0 when allowed (the amount counted),
   else the wait. Over the limit with a timeout, the key is blocked until now + timeout and every call until then
   answers the block's time left; without one (throttle), refused requests are not counted and the answer is the
   time until the estimate lets the amount through (at least 1; a period when the amount exceeds the limit, which
   never fits). ``check`` answers as ``acquire`` without counting (it does start a block when it refuses with a
   timeout), for rules that count after the answer with ``add``, which counts without deciding and starts the block
   when the count passes the limit. All three find or claim the key's slot.

   Memory is the layout and nothing else. When a new key finds its bucket full (no free slot), the slot with the
   lowest estimated rate relative to its limit gives way (space-saving); a blocked slot gives way last. The new key
   inherits the evicted slot's counts when it is of the same rule, so eviction can make a key's count too high,
   never too low: the overcount is at most the evicted slot's estimate, which is the smallest (relative to the
   limit) of its bucket's eight. A heavy key near or over its limit is thus never displaced by a flood of light
   keys, and displaced by heavier ones only to be overcounted when it comes back. What gives way first under a flood
   of more distinct keys in a period than the table has slots is therefore the new keys: each inherits a count
   that grows with the evictions of its bucket (about keys per bucket / 8 in a period), and once that passes the
   limit, new keys of the rule are refused until their windows pass, while the keys already counted keep their
   counts. Evictions and saturations are counted in the header (``take_counts``), for a metric. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sched.h>

#define MAGIC 0x454C424154455441ull /* "ATETABLE" read as little-endian text, a rate table's mark */
#define VERSION 1u
#define SLOTS_PER_BUCKET 8
#define TAKEOVER_MS 100u
#define SPINS_BEFORE_YIELD 64
#define TAG_TEXT 1
#define TAG_BYTES 2

typedef struct {
    uint64_t magic;
    uint32_t version;
    uint32_t reserved;
    uint64_t slots;
    uint8_t key[16];
    uint64_t evictions;
    uint64_t saturations;
    uint64_t reserved2;
} Header;

typedef struct {
    uint64_t hash;
    uint32_t rule;
    uint32_t period_ms;
    int64_t window_start;
    uint64_t current;
    uint64_t previous;
    int64_t blocked_until;
    int64_t last_touch;
    uint32_t limit;
    uint32_t lock;
} Slot;

_Static_assert(sizeof(Header) == 64, "the header is one cache line");
_Static_assert(sizeof(Slot) == 64, "a slot is one cache line");

/* SipHash-2-4, fed in pieces. */

typedef struct {
    uint64_t v0, v1, v2, v3;
    uint64_t tail;   /* the pending bytes, little-endian */
    unsigned pending; /* how many */
    uint64_t length;
} SipHash;

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static inline void sip_round(SipHash *s) {
    s->v0 += s->v1; s->v1 = ROTL(s->v1, 13); s->v1 ^= s->v0; s->v0 = ROTL(s->v0, 32);
    s->v2 += s->v3; s->v3 = ROTL(s->v3, 16); s->v3 ^= s->v2;
    s->v0 += s->v3; s->v3 = ROTL(s->v3, 21); s->v3 ^= s->v0;
    s->v2 += s->v1; s->v1 = ROTL(s->v1, 17); s->v1 ^= s->v2; s->v2 = ROTL(s->v2, 32);
}

static inline uint64_t load_le64(const uint8_t *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline void sip_start(SipHash *s, const uint8_t key[16]) {
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    s->v0 = k0 ^ 0x736f6d6570736575ull;
    s->v1 = k1 ^ 0x646f72616e646f6dull;
    s->v2 = k0 ^ 0x6c7967656e657261ull;
    s->v3 = k1 ^ 0x7465646279746573ull;
    s->tail = 0;
    s->pending = 0;
    s->length = 0;
}

static inline void sip_block(SipHash *s, uint64_t m) {
    s->v3 ^= m;
    sip_round(s);
    sip_round(s);
    s->v0 ^= m;
}

static void sip_feed(SipHash *s, const uint8_t *data, size_t size) {
    s->length += size;
    while (size > 0 && s->pending != 0) {
        s->tail |= (uint64_t)*data++ << (8 * s->pending);
        size--;
        if (++s->pending == 8) {
            sip_block(s, s->tail);
            s->tail = 0;
            s->pending = 0;
        }
    }
    while (size >= 8) {
        sip_block(s, load_le64(data));
        data += 8;
        size -= 8;
    }
    while (size > 0) {
        s->tail |= (uint64_t)*data++ << (8 * s->pending++);
        size--;
    }
}

static uint64_t sip_finish(SipHash *s) {
    sip_block(s, s->tail | (s->length & 0xff) << 56);
    s->v2 ^= 0xff;
    sip_round(s);
    sip_round(s);
    sip_round(s);
    sip_round(s);
    return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

static void feed_le(SipHash *s, uint64_t value, int size) {
    uint8_t bytes[8];
    for (int index = 0; index < size; index++) bytes[index] = (uint8_t)(value >> (8 * index));
    sip_feed(s, bytes, (size_t)size);
}

/* The key's hash; -1 with an exception when a value is neither text nor bytes. */
static int key_hash(const uint8_t key[16], uint32_t rule, PyObject *values, uint64_t *hash) {
    SipHash s;
    sip_start(&s, key);
    feed_le(&s, rule, 4);
    Py_ssize_t count = PyTuple_GET_SIZE(values);
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *value = PyTuple_GET_ITEM(values, index);
        const char *data;
        Py_ssize_t size;
        uint8_t tag;
        if (PyUnicode_Check(value)) {
            data = PyUnicode_AsUTF8AndSize(value, &size);
            if (data == NULL) return -1;
            tag = TAG_TEXT;
        } else if (PyBytes_Check(value)) {
            data = PyBytes_AS_STRING(value);
            size = PyBytes_GET_SIZE(value);
            tag = TAG_BYTES;
        } else {
            PyErr_Format(PyExc_TypeError, "a characteristic value must be str or bytes, not %.100s",
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        sip_feed(&s, &tag, 1);
        feed_le(&s, (uint64_t)size, 8);
        sip_feed(&s, (const uint8_t *)data, (size_t)size);
    }
    *hash = sip_finish(&s);
    return 0;
}

/* The machine's monotonic clock in ms: the counters' time when the caller gives 2^63 - 1. */
static inline int64_t monotonic_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + (int64_t)now.tv_nsec / 1000000;
}

/* The bucket lock. */

static inline uint32_t lock_stamp(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint32_t stamp = (uint32_t)((uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u);
    return stamp == 0 ? 1 : stamp;
}

static uint32_t bucket_lock(uint32_t *lock) {
    for (unsigned spins = 0;; spins++) {
        uint32_t mine = lock_stamp();
        uint32_t held = __atomic_load_n(lock, __ATOMIC_RELAXED);
        if (held == 0 || (int32_t)(mine - held) > (int32_t)TAKEOVER_MS) {
            if (__atomic_compare_exchange_n(lock, &held, mine, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return mine;
            continue;
        }
        if (spins % SPINS_BEFORE_YIELD == SPINS_BEFORE_YIELD - 1)
            sched_yield(); /* the owner is another process, perhaps not running: let it */
        else
            __builtin_ia32_pause();
    }
}

static inline void bucket_unlock(uint32_t *lock, uint32_t mine) {
    /* Released only if still ours: after a takeover, the lock is the taker's. */
    __atomic_compare_exchange_n(lock, &mine, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* Counting. */

typedef unsigned __int128 u128;

static inline int64_t window_of(int64_t now, uint32_t period) { return now - now % (int64_t)period; }

/* The slot's counts as seen at ``now`` (without changing it): previous, current and ms into the window. */
static void counts_at(const Slot *slot, int64_t now, uint64_t *previous, uint64_t *current, int64_t *elapsed) {
    uint32_t period = slot->period_ms;
    int64_t start = window_of(now, period);
    if (start <= slot->window_start) { /* this window (or a clock behind the slot's) */
        *previous = slot->previous;
        *current = slot->current;
        *elapsed = now > slot->window_start ? now - slot->window_start : 0;
    } else if (start - (int64_t)period == slot->window_start) {
        *previous = slot->current;
        *current = 0;
        *elapsed = now - start;
    } else {
        *previous = 0;
        *current = 0;
        *elapsed = now - start;
    }
}

static void roll(Slot *slot, int64_t now) {
    uint64_t previous, current;
    int64_t elapsed;
    counts_at(slot, now, &previous, &current, &elapsed);
    int64_t start = window_of(now, slot->period_ms);
    if (start > slot->window_start) slot->window_start = start;
    slot->previous = previous;
    slot->current = current;
}

static inline int slot_free(const Slot *slot, int64_t now) {
    return slot->period_ms == 0 ||
           (now - slot->last_touch >= 2 * (int64_t)slot->period_ms && slot->blocked_until <= now);
}

/* The slot's estimate relative to its limit, in 1/65536ths, saturated; blocked slots rank highest. */
static uint64_t eviction_rank(const Slot *slot, int64_t now) {
    if (slot->blocked_until > now) return UINT64_MAX;
    uint64_t previous, current;
    int64_t elapsed;
    counts_at(slot, now, &previous, &current, &elapsed);
    uint64_t period = slot->period_ms;
    u128 weighted = (u128)previous * (period - (uint64_t)elapsed) + (u128)current * period;
    u128 scale = (u128)period * (slot->limit == 0 ? 1 : slot->limit);
    /* weighted < 2^97, so shifting by 16 stays within 128 bits */
    u128 rank = (weighted << 16) / scale;
    return rank > UINT64_MAX ? UINT64_MAX : (uint64_t)rank;
}

static Py_ssize_t layout_bytes(uint64_t slots) {
    return (Py_ssize_t)(sizeof(Header) + slots * sizeof(Slot));
}

typedef struct {
    PyObject_HEAD
    Py_buffer view;
    int attached;
    Header *header;
    Slot *slots;
    uint64_t buckets;
    uint8_t key[16]; /* the header's, copied once it is written or validated */
    int ready;
} RateTable;

/* The key's slot, found or claimed, with its bucket locked (unlock with the returned stamp). */
static Slot *claim(RateTable *self, uint64_t hash, uint32_t rule, uint32_t period, int64_t now, uint32_t *stamp,
                   uint32_t **lock) {
    Slot *bucket = self->slots + (hash % self->buckets) * SLOTS_PER_BUCKET;
    *lock = &bucket[0].lock;
    *stamp = bucket_lock(*lock);
    Slot *found = NULL, *free = NULL;
    for (int index = 0; index < SLOTS_PER_BUCKET; index++) {
        Slot *slot = bucket + index;
        if (slot->period_ms != 0 && slot->hash == hash && slot->rule == rule) {
            found = slot;
            break;
        }
        if (free == NULL && slot_free(slot, now)) free = slot;
    }
    if (found != NULL) {
        if (found->period_ms != period || slot_free(found, now)) { /* a new period, or a new life */
            found->period_ms = period;
            found->window_start = window_of(now, period);
            found->current = found->previous = 0;
            found->blocked_until = 0;
        }
        return found;
    }
    Slot *slot = free;
    int inherit = 0;
    if (slot == NULL) {
        uint64_t lowest = UINT64_MAX;
        slot = bucket;
        for (int index = 0; index < SLOTS_PER_BUCKET; index++) {
            uint64_t rank = eviction_rank(bucket + index, now);
            if (index == 0 || rank < lowest) {
                lowest = rank;
                slot = bucket + index;
            }
        }
        inherit = slot->rule == rule && slot->period_ms == period;
        __atomic_fetch_add(&self->header->evictions, 1, __ATOMIC_RELAXED);
    }
    slot->hash = hash;
    slot->rule = rule;
    slot->blocked_until = 0;
    if (!inherit) {
        slot->period_ms = period;
        slot->window_start = window_of(now, period);
        slot->current = slot->previous = 0;
    }
    return slot;
}

/* Whether ``amount`` more is over the limit at ``now`` (the slot rolled to now). */
static inline int over_limit(const Slot *slot, int64_t now, uint64_t limit, uint64_t amount) {
    uint64_t period = slot->period_ms;
    uint64_t elapsed = (uint64_t)(now > slot->window_start ? now - slot->window_start : 0);
    u128 seen = (u128)slot->previous * (period - elapsed) + ((u128)slot->current + amount) * period;
    return seen > (u128)limit * period;
}

/* Ms from ``now`` until ``amount`` is no longer over the limit, if nothing more is counted (at least 1). */
static int64_t throttle_wait(const Slot *slot, int64_t now, uint64_t limit, uint64_t amount) {
    u128 period = slot->period_ms;
    int64_t start = slot->window_start;
    int64_t at; /* when it fits */
    if ((u128)slot->current + amount <= limit) {
        /* within this window, once previous * (period - e) <= (limit - current - amount) * period */
        u128 room = ((u128)limit - slot->current - amount) * period;
        u128 fits = slot->previous == 0 ? period : room / slot->previous;
        at = start + (int64_t)(period - (fits > period ? period : fits));
    } else if (amount <= limit) {
        /* in the next window, once current * (period - e) <= (limit - amount) * period */
        u128 room = ((u128)limit - amount) * period;
        u128 fits = slot->current == 0 ? period : room / slot->current;
        at = start + (int64_t)period + (int64_t)(period - (fits > period ? period : fits));
    } else {
        return (int64_t)period; /* more than the limit never fits: ask again in a period */
    }
    return at - now > 0 ? at - now : 1;
}

static inline void touch(Slot *slot, int64_t now, uint64_t limit) {
    if (now > slot->last_touch) slot->last_touch = now;
    slot->limit = limit > UINT32_MAX ? UINT32_MAX : (uint32_t)limit;
}

static void add_saturating(RateTable *self, Slot *slot, uint64_t amount) {
    uint64_t sum;
    if (__builtin_add_overflow(slot->current, amount, &sum)) {
        sum = UINT64_MAX;
        __atomic_fetch_add(&self->header->saturations, 1, __ATOMIC_RELAXED);
    }
    slot->current = sum;
}

static inline int64_t block_end(int64_t now, int64_t timeout) {
    int64_t end;
    return __builtin_add_overflow(now, timeout, &end) ? INT64_MAX : end;
}

/* Arguments. */

typedef struct {
    uint32_t rule;
    PyObject *values;
    uint32_t period;
    uint64_t limit, amount;
    int64_t timeout, now;
} Request;

static int unsigned_argument(PyObject *object, const char *name, uint64_t high, uint64_t *out) {
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int", name);
        return -1;
    }
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (value == -1 && PyErr_Occurred()) return -1;
    if (overflow < 0 || (overflow == 0 && value < 0)) {
        PyErr_Format(PyExc_ValueError, "%s must not be negative", name);
        return -1;
    }
    if (overflow > 0) {
        unsigned long long big = PyLong_AsUnsignedLongLong(object);
        if (big == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            big = UINT64_MAX;
            if (high != UINT64_MAX) goto too_large;
        }
        if (big > high) goto too_large;
        *out = big;
        return 0;
    }
    if ((uint64_t)value > high) goto too_large;
    *out = (uint64_t)value;
    return 0;
too_large:
    PyErr_Format(PyExc_ValueError, "%s is too large", name);
    return -1;
}

static int ready(RateTable *self) {
    if (!self->attached) {
        PyErr_SetString(PyExc_ValueError, "the rate table is closed");
        return 0;
    }
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "the rate table is not initialised");
        return 0;
    }
    return 1;
}

/* (rule, values, period_ms, limit, amount, timeout_ms, now_ms), and the key's hash */
static int parse_request(RateTable *self, PyObject *const *args, Py_ssize_t nargs, Request *request,
                         uint64_t *hash) {
    uint64_t value;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "expected 7 arguments: (rule, values, period_ms, limit, amount, timeout_ms, "
                                         "now_ms)");
        return -1;
    }
    if (!ready(self)) return -1;
    if (unsigned_argument(args[0], "rule", UINT32_MAX, &value) < 0) return -1;
    request->rule = (uint32_t)value;
    if (!PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "values must be a tuple");
        return -1;
    }
    request->values = args[1];
    if (unsigned_argument(args[2], "period_ms", UINT32_MAX, &value) < 0) return -1;
    if (value == 0) {
        PyErr_SetString(PyExc_ValueError, "period_ms must be positive");
        return -1;
    }
    request->period = (uint32_t)value;
    if (unsigned_argument(args[3], "limit", UINT64_MAX, &request->limit) < 0) return -1;
    if (unsigned_argument(args[4], "amount", UINT64_MAX, &request->amount) < 0) return -1;
    if (unsigned_argument(args[5], "timeout_ms", INT64_MAX, &value) < 0) return -1;
    request->timeout = (int64_t)value;
    if (unsigned_argument(args[6], "now_ms", INT64_MAX, &value) < 0) return -1;
    request->now = value == (uint64_t)INT64_MAX ? monotonic_ms() : (int64_t)value;
    return key_hash(self->key, request->rule, request->values, hash);
}

/* acquire and check: the decision, counting the amount when allowed if ``counts``. */
static PyObject *decide(RateTable *self, PyObject *const *args, Py_ssize_t nargs, int counts) {
    Request r;
    uint64_t hash;
    if (parse_request(self, args, nargs, &r, &hash) < 0) return NULL;
    uint32_t stamp, *lock;
    Slot *slot = claim(self, hash, r.rule, r.period, r.now, &stamp, &lock);
    roll(slot, r.now);
    int64_t wait = 0;
    if (slot->blocked_until > r.now) {
        wait = slot->blocked_until - r.now;
    } else if (!over_limit(slot, r.now, r.limit, r.amount)) {
        if (counts) add_saturating(self, slot, r.amount);
    } else if (r.timeout > 0) {
        slot->blocked_until = block_end(r.now, r.timeout);
        wait = slot->blocked_until - r.now;
    } else {
        wait = throttle_wait(slot, r.now, r.limit, r.amount);
    }
    touch(slot, r.now, r.limit);
    bucket_unlock(lock, stamp);
    return PyLong_FromLongLong(wait);
}

static PyObject *table_acquire(RateTable *self, PyObject *const *args, Py_ssize_t nargs) {
    return decide(self, args, nargs, 1);
}

static PyObject *table_check(RateTable *self, PyObject *const *args, Py_ssize_t nargs) {
    return decide(self, args, nargs, 0);
}

static PyObject *table_add(RateTable *self, PyObject *const *args, Py_ssize_t nargs) {
    Request r;
    uint64_t hash;
    if (parse_request(self, args, nargs, &r, &hash) < 0) return NULL;
    uint32_t stamp, *lock;
    Slot *slot = claim(self, hash, r.rule, r.period, r.now, &stamp, &lock);
    roll(slot, r.now);
    add_saturating(self, slot, r.amount);
    if (r.timeout > 0 && slot->blocked_until <= r.now && over_limit(slot, r.now, r.limit, 0))
        slot->blocked_until = block_end(r.now, r.timeout);
    touch(slot, r.now, r.limit);
    bucket_unlock(lock, stamp);
    Py_RETURN_NONE;
}

static PyObject *table_key_hash(RateTable *self, PyObject *const *args, Py_ssize_t nargs) {
    uint64_t rule, hash;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "key_hash(rule, values)");
        return NULL;
    }
    if (!ready(self)) return NULL;
    if (unsigned_argument(args[0], "rule", UINT32_MAX, &rule) < 0) return NULL;
    if (!PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "values must be a tuple");
        return NULL;
    }
    if (key_hash(self->key, (uint32_t)rule, args[1], &hash) < 0) return NULL;
    return PyLong_FromUnsignedLongLong(hash);
}

static PyObject *table_occupied(RateTable *self, PyObject *argument) {
    uint64_t now;
    if (!ready(self)) return NULL;
    if (unsigned_argument(argument, "now_ms", INT64_MAX, &now) < 0) return NULL;
    if (now == (uint64_t)INT64_MAX) now = (uint64_t)monotonic_ms();
    uint64_t slots = self->buckets * SLOTS_PER_BUCKET, used = 0;
    for (uint64_t index = 0; index < slots; index++) used += !slot_free(self->slots + index, (int64_t)now);
    return PyLong_FromUnsignedLongLong(used);
}

static PyObject *table_take_counts(RateTable *self, PyObject *Py_UNUSED(ignored)) {
    if (!ready(self)) return NULL;
    uint64_t evictions = __atomic_exchange_n(&self->header->evictions, 0, __ATOMIC_RELAXED);
    uint64_t saturations = __atomic_exchange_n(&self->header->saturations, 0, __ATOMIC_RELAXED);
    return Py_BuildValue("(KK)", (unsigned long long)evictions, (unsigned long long)saturations);
}

static PyObject *table_initialise(RateTable *self, PyObject *key) {
    if (!self->attached) {
        PyErr_SetString(PyExc_ValueError, "the rate table is closed");
        return NULL;
    }
    if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) != 16) {
        PyErr_SetString(PyExc_ValueError, "the key must be 16 bytes");
        return NULL;
    }
    memset(self->view.buf, 0, (size_t)layout_bytes(self->buckets * SLOTS_PER_BUCKET));
    memcpy(self->header->key, PyBytes_AS_STRING(key), 16);
    memcpy(self->key, PyBytes_AS_STRING(key), 16);
    self->header->slots = self->buckets * SLOTS_PER_BUCKET;
    self->header->version = VERSION;
    __atomic_store_n(&self->header->magic, MAGIC, __ATOMIC_RELEASE);
    self->ready = 1;
    Py_RETURN_NONE;
}

static void release(RateTable *self) {
    if (self->attached) {
        PyBuffer_Release(&self->view);
        self->attached = 0;
        self->ready = 0;
        self->header = NULL;
        self->slots = NULL;
    }
}

static PyObject *table_close(RateTable *self, PyObject *Py_UNUSED(ignored)) {
    release(self);
    Py_RETURN_NONE;
}

static int valid_slots(PyObject *argument, uint64_t *slots) {
    if (unsigned_argument(argument, "slots", ((uint64_t)PY_SSIZE_T_MAX - sizeof(Header)) / sizeof(Slot), slots) < 0)
        return -1;
    if (*slots == 0 || *slots % SLOTS_PER_BUCKET != 0) {
        PyErr_SetString(PyExc_ValueError, "slots must be a positive multiple of 8");
        return -1;
    }
    return 0;
}

static int table_init(RateTable *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"buffer", "slots", NULL};
    PyObject *buffer, *slots_argument;
    uint64_t slots;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO", keywords, &buffer, &slots_argument)) return -1;
    if (valid_slots(slots_argument, &slots) < 0) return -1;
    release(self);
    if (PyObject_GetBuffer(buffer, &self->view, PyBUF_WRITABLE) < 0) return -1;
    self->attached = 1;
    if (self->view.len < layout_bytes(slots)) {
        release(self);
        PyErr_SetString(PyExc_ValueError, "the buffer is smaller than the layout of that many slots");
        return -1;
    }
    if (((uintptr_t)self->view.buf & 63) != 0) {
        release(self);
        PyErr_SetString(PyExc_ValueError, "the buffer must be aligned to 64 bytes (a mapping is)");
        return -1;
    }
    self->header = (Header *)self->view.buf;
    self->slots = (Slot *)((char *)self->view.buf + sizeof(Header));
    self->buckets = slots / SLOTS_PER_BUCKET;
    uint64_t magic = __atomic_load_n(&self->header->magic, __ATOMIC_ACQUIRE);
    if (magic == 0) return 0; /* a blank buffer, for ``initialise`` */
    if (magic != MAGIC || self->header->version != VERSION || self->header->slots != slots) {
        release(self);
        PyErr_SetString(PyExc_ValueError,
                        "the buffer holds no rate table of this version and slot count");
        return -1;
    }
    memcpy(self->key, self->header->key, 16);
    self->ready = 1;
    return 0;
}

static int table_traverse(RateTable *self, visitproc visit, void *arg) {
    if (self->attached) Py_VISIT(self->view.obj);
    return 0;
}

static int table_clear(RateTable *self) {
    release(self);
    return 0;
}

static void table_dealloc(RateTable *self) {
    PyObject_GC_UnTrack(self);
    release(self);
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *table_get_slots(RateTable *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->buckets * SLOTS_PER_BUCKET);
}

static PyObject *table_get_initialised(RateTable *self, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(self->attached && self->ready);
}

static PyMethodDef table_methods[] = {
    {"initialise", (PyCFunction)table_initialise, METH_O,
     "initialise(key): writes an empty table with this 16-byte SipHash key (the creator only)."},
    {"acquire", (PyCFunction)(void (*)(void))table_acquire, METH_FASTCALL,
     "acquire(rule, values, period_ms, limit, amount, timeout_ms, now_ms): 0 and amount counted when allowed, "
     "else the wait in ms."},
    {"check", (PyCFunction)(void (*)(void))table_check, METH_FASTCALL,
     "check(rule, values, period_ms, limit, amount, timeout_ms, now_ms): acquire's answer, counting nothing."},
    {"add", (PyCFunction)(void (*)(void))table_add, METH_FASTCALL,
     "add(rule, values, period_ms, limit, amount, timeout_ms, now_ms): counts amount, blocking when over the limit "
     "with a timeout."},
    {"key_hash", (PyCFunction)(void (*)(void))table_key_hash, METH_FASTCALL,
     "key_hash(rule, values): the key's 64-bit SipHash under the table's key."},
    {"occupied", (PyCFunction)table_occupied, METH_O, "occupied(now_ms): how many slots are in use."},
    {"take_counts", (PyCFunction)table_take_counts, METH_NOARGS,
     "take_counts(): (evictions, saturations) since the last call, which resets them."},
    {"close", (PyCFunction)table_close, METH_NOARGS, "close(): releases the buffer."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef table_getset[] = {
    {"slots", (getter)table_get_slots, NULL, "the table's slot count", NULL},
    {"initialised", (getter)table_get_initialised, NULL, "whether the buffer holds a table to count in", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot table_slots[] = {
    {Py_tp_doc, "The node's rate limiting counters in a shared buffer (see the module)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, table_init},
    {Py_tp_dealloc, table_dealloc},
    {Py_tp_traverse, table_traverse},
    {Py_tp_clear, table_clear},
    {Py_tp_methods, table_methods},
    {Py_tp_getset, table_getset},
    {0, NULL},
};

static PyType_Spec table_spec = {
    .name = "edgeplane.rate_table.RateTable",
    .basicsize = sizeof(RateTable),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = table_slots,
};

static PyObject *module_layout_size(PyObject *Py_UNUSED(module), PyObject *argument) {
    uint64_t slots;
    if (valid_slots(argument, &slots) < 0) return NULL;
    return PyLong_FromSsize_t(layout_bytes(slots));
}

static PyObject *module_siphash24(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) != 16 || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "siphash24(key: 16 bytes, data: bytes)");
        return NULL;
    }
    SipHash s;
    sip_start(&s, (const uint8_t *)PyBytes_AS_STRING(args[0]));
    sip_feed(&s, (const uint8_t *)PyBytes_AS_STRING(args[1]), (size_t)PyBytes_GET_SIZE(args[1]));
    return PyLong_FromUnsignedLongLong(sip_finish(&s));
}

static PyMethodDef module_methods[] = {
    {"layout_size", (PyCFunction)module_layout_size, METH_O,
     "layout_size(slots): the bytes a table of that many slots (a positive multiple of 8) takes."},
    {"siphash24", (PyCFunction)(void (*)(void))module_siphash24, METH_FASTCALL,
     "siphash24(key, data): SipHash-2-4 of data under a 16-byte key, as the table hashes its keys."},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *module) {
    PyObject *type = PyType_FromModuleAndSpec(module, &table_spec, NULL);
    if (type == NULL) return -1;
    if (PyModule_AddObject(module, "RateTable", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    if (PyModule_AddIntConstant(module, "HEADER_SIZE", sizeof(Header)) < 0) return -1;
    if (PyModule_AddIntConstant(module, "SLOT_SIZE", sizeof(Slot)) < 0) return -1;
    if (PyModule_AddIntConstant(module, "SLOTS_PER_BUCKET", SLOTS_PER_BUCKET) < 0) return -1;
    if (PyModule_AddIntConstant(module, "TAKEOVER_MS", TAKEOVER_MS) < 0) return -1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef rate_table_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "edgeplane.rate_table",
    .m_doc = "The node's rate limiting counters in shared memory (see the opening comment of rate_table.c).",
    .m_size = 0,
    .m_methods = module_methods,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit_rate_table(void) { return PyModuleDef_Init(&rate_table_module); }
