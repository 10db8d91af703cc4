/* edgeplane.edge.row_writer: the request log's ``commit`` of an ordinary answer, in C.

   What it does: what the fast path of ``RequestLog.commit_in_python`` (``request_log.py``) does for an allowed
   request whose values all have their usual types and whose shape the open journal period already numbers: it reads
   the row's fields from the request, the answer and the exchange, finds the shape's number (the row before's when
   the texts are equal to its, without building a tuple; else a look-up in the period's dictionary of shapes), and
   writes the row's frame (``request_rows.ROW_FRAME``) into the period's mapping, its commit word last. Everything
   else (no period open, a full period, a new shape, a firewall verdict, a number beyond 64 bits, a ray id that is
   not 16 bytes, a value of an unexpected type, an exchange not started) goes to ``slow``, which is
   ``commit_in_python`` itself: the Python code handles every case, stays the reference, and
   ``tests/edge/test_row_writer.py`` holds the two to the same journal bytes.

   Why by hand, in C: the row is written on the request's path, before its answer may leave (issue 22: a record must
   outlive a ``kill -9`` once its answer was sent). In the interpreter the row cost too much of the emission budget
   in place (fifteen attribute loads into a tuple, its hash and comparison, and ``pack_into`` with sixteen
   arguments); this costs a fraction of that (``docs/benchmarks.md``, "Log pipeline", has the figures). No library maps an application's objects onto
   a packed record; ``struct`` and ``operator`` each do a piece per call, and the calls are what cost.

   Only the public C API: attributes are read with ``PyObject_GetAttr`` (names interned once), numbers converted
   with ``PyLong_AsLongLongAndOverflow``, and the mapping is written through the buffer protocol: ``attach`` takes
   the period's ``mmap`` buffer and ``detach`` releases it (the mapping cannot be closed while attached). While
   attached, the writer's ``end`` is where the period's next frame goes; the request log hands it to and from the
   journal around everything else it writes. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define SHAPE_SIZE 20
#define NUMBER_COUNT 9
#define RAY_BYTES 16
#define NOTED_COUNT 8
#define ROW_KIND 1
#define COMMIT_MARK 0x214A5045u

/* ``request_rows.ROW_FRAME``: "=II9q16sII". */
typedef struct {
    uint32_t length, kind;
    int64_t numbers[NUMBER_COUNT];
    char ray[RAY_BYTES];
    uint32_t shape;
    uint32_t commit;
} RowFrame;

#define ROW_FRAME_SIZE ((Py_ssize_t)sizeof(RowFrame))
#define ROW_PAYLOAD_SIZE ((uint32_t)(offsetof(RowFrame, commit) - offsetof(RowFrame, numbers)))

_Static_assert(sizeof(RowFrame) == 104, "a row frame is 104 bytes");

enum {
    A_CONTEXT, A_CLIENT, A_NOTED, A_METHOD, A_PATH, A_QUERY, A_VERSION, A_SERVER, A_LENGTH,
    A_STATUS, A_BODY, A_CONTENT_TYPE,
    A_HOST, A_ZONE, A_RAY, A_STARTED, A_COUNTRY, A_ASN, A_VERDICT, A_ORIGIN_STATUS, A_ORIGIN_MS, A_CACHE,
    A_NETWORK, A_RPC_METHOD, A_RPC_REQUESTS, A_RPC_ERROR_CODE, A_UPSTREAM,
    A_ZONE_NAME, A_COUNT
};

static const char *const attribute_names[A_COUNT] = {
    "context", "client", "noted", "method", "path", "query_string", "http_version", "server", "content_length",
    "status", "body", "content_type",
    "host", "zone", "ray_id", "started_ns", "country", "asn", "verdict", "origin_status", "origin_duration_ms",
    "cache_status", "network", "rpc_method", "rpc_requests", "rpc_error_code", "upstream", "zone_name",
};

static PyObject *names[A_COUNT];
static PyObject *empty_text;

typedef struct {
    PyObject_HEAD
    PyObject *exchange_type; /* ``Exchange``: an exchange of any other class goes to ``slow`` */
    PyObject *allowed;       /* ``ALLOWED``: the verdict of a request no rule matched */
    PyObject *slow;          /* ``commit_in_python`` */
    Py_ssize_t user_agent, referer, requested_with; /* indices of ``EdgeRequest.noted`` */
    /* The open period, while attached. */
    Py_buffer view;
    int attached;
    PyObject *shapes; /* the period's dictionary of shapes, shared with the request log */
    Py_ssize_t end, limit;
    PyObject *last;   /* the last row's shape tuple (or NULL), and its number */
    uint32_t last_number;
} RowWriter;

static void clear_period(RowWriter *self) {
    if (self->attached) {
        PyBuffer_Release(&self->view);
        self->attached = 0;
    }
    Py_CLEAR(self->shapes);
    Py_CLEAR(self->last);
    self->end = 0;
    self->limit = 0;
}

static int writer_init(RowWriter *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"exchange_type", "allowed", "slow", "noted_count", "user_agent", "referer",
                               "requested_with", NULL};
    PyObject *exchange_type, *allowed, *slow;
    Py_ssize_t noted_count, user_agent, referer, requested_with;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOnnnn", keywords, &PyType_Type, &exchange_type, &allowed,
                                     &slow, &noted_count, &user_agent, &referer, &requested_with))
        return -1;
    if (noted_count != NOTED_COUNT || user_agent < 0 || user_agent >= NOTED_COUNT || referer < 0 ||
        referer >= NOTED_COUNT || requested_with < 0 || requested_with >= NOTED_COUNT) {
        PyErr_SetString(PyExc_ValueError, "the noted headers are not those this module was written for");
        return -1;
    }
    if (!PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "slow must be callable");
        return -1;
    }
    clear_period(self);
    Py_INCREF(exchange_type);
    Py_XSETREF(self->exchange_type, exchange_type);
    Py_INCREF(allowed);
    Py_XSETREF(self->allowed, allowed);
    Py_INCREF(slow);
    Py_XSETREF(self->slow, slow);
    self->user_agent = user_agent;
    self->referer = referer;
    self->requested_with = requested_with;
    return 0;
}

static int writer_traverse(RowWriter *self, visitproc visit, void *arg) {
    Py_VISIT(self->exchange_type);
    Py_VISIT(self->allowed);
    Py_VISIT(self->slow);
    Py_VISIT(self->shapes);
    Py_VISIT(self->last);
    if (self->attached) Py_VISIT(self->view.obj);
    return 0;
}

static int writer_clear(RowWriter *self) {
    clear_period(self);
    Py_CLEAR(self->exchange_type);
    Py_CLEAR(self->allowed);
    Py_CLEAR(self->slow);
    return 0;
}

static void writer_dealloc(RowWriter *self) {
    PyObject_GC_UnTrack(self);
    writer_clear(self);
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *writer_attach(RowWriter *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t end, limit;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "attach(mapping, shapes, end, limit)");
        return NULL;
    }
    if (!PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "shapes must be a dict");
        return NULL;
    }
    end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred()) return NULL;
    limit = PyLong_AsSsize_t(args[3]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    clear_period(self);
    if (PyObject_GetBuffer(args[0], &self->view, PyBUF_WRITABLE) < 0) return NULL;
    self->attached = 1;
    if (end < 0 || end > self->view.len || limit < 0 || limit > self->view.len) {
        clear_period(self);
        PyErr_SetString(PyExc_ValueError, "end and limit must lie within the mapping");
        return NULL;
    }
    Py_INCREF(args[1]);
    self->shapes = args[1];
    self->end = end;
    self->limit = limit;
    Py_RETURN_NONE;
}

static PyObject *writer_detach(RowWriter *self, PyObject *Py_UNUSED(ignored)) {
    clear_period(self);
    Py_RETURN_NONE;
}

/* The value of a number for the row, into ``out``: 0, or 1 when it is not an int that fits 64 bits (the row is
   then kept whole, by ``slow``), or -1 with an exception set. */
static int number_of(PyObject *value, int64_t *out) {
    int overflow;
    long long number;
    if (!PyLong_Check(value)) return 1;
    number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) return 1;
    if (number == -1 && PyErr_Occurred()) return -1;
    *out = (int64_t)number;
    return 0;
}

/* The shape's number in the period, into ``out``: 0, or 1 when the period has no such shape yet, or -1 with an
   exception set. Takes the references of ``values``' items. */
static int shape_number(RowWriter *self, PyObject **values, uint32_t *out) {
    PyObject *last = self->last;
    if (last != NULL) {
        int same = 1;
        for (int index = 0; index < SHAPE_SIZE && same; index++) {
            PyObject *known = PyTuple_GET_ITEM(last, index);
            if (known != values[index]) {
                same = PyObject_RichCompareBool(known, values[index], Py_EQ);
                if (same < 0) return -1;
            }
        }
        if (same) {
            *out = self->last_number;
            return 0;
        }
    }
    PyObject *shape = PyTuple_New(SHAPE_SIZE);
    if (shape == NULL) return -1;
    for (int index = 0; index < SHAPE_SIZE; index++) {
        Py_INCREF(values[index]);
        PyTuple_SET_ITEM(shape, index, values[index]);
    }
    PyObject *number = PyDict_GetItemWithError(self->shapes, shape); /* borrowed */
    if (number == NULL) {
        Py_DECREF(shape);
        return PyErr_Occurred() ? -1 : 1;
    }
    unsigned long found = PyLong_AsUnsignedLong(number);
    if (found == (unsigned long)-1 && PyErr_Occurred()) {
        Py_DECREF(shape);
        return -1;
    }
    if (found > UINT32_MAX) {
        Py_DECREF(shape);
        PyErr_SetString(PyExc_ValueError, "a shape number beyond 32 bits");
        return -1;
    }
    Py_XSETREF(self->last, shape);
    self->last_number = (uint32_t)found;
    *out = (uint32_t)found;
    return 0;
}

/* Writes the row of an answer into the attached period: 0, or 1 when ``slow`` must (see the opening comment), or
   -1 with an exception set. */
static int write_row(RowWriter *self, PyObject *request, PyObject *response, int64_t sent_bytes, int64_t written_ns) {
    PyObject *got[A_COUNT] = {NULL};
    PyObject *shape[SHAPE_SIZE];
    RowFrame frame;
    int outcome = 1;

#define GET(index, object)                                              \
    do {                                                                \
        if ((got[index] = PyObject_GetAttr((object), names[index])) == NULL) { \
            outcome = -1;                                               \
            goto done;                                                  \
        }                                                               \
    } while (0)
#define NUMBER(slot, value)                                             \
    do {                                                                \
        int status = number_of((value), &frame.numbers[slot]);          \
        if (status) {                                                   \
            outcome = status;                                           \
            goto done;                                                  \
        }                                                               \
    } while (0)

    if (!self->attached || self->end + ROW_FRAME_SIZE > self->limit) goto done;
    GET(A_CONTEXT, request);
    PyObject *exchange = got[A_CONTEXT];
    if ((PyObject *)Py_TYPE(exchange) != self->exchange_type) goto done;
    GET(A_VERDICT, exchange);
    if (got[A_VERDICT] != self->allowed) goto done;
    GET(A_RAY, exchange);
    if (!PyUnicode_Check(got[A_RAY])) goto done;
    Py_ssize_t ray_length;
    const char *ray = PyUnicode_AsUTF8AndSize(got[A_RAY], &ray_length);
    if (ray == NULL) {
        outcome = -1;
        goto done;
    }
    if (ray_length != RAY_BYTES) goto done; /* not started (""), or a ray id of another form: kept whole */

    GET(A_CLIENT, request);
    PyObject *client = got[A_CLIENT];
    if (client != Py_None && !(PyTuple_CheckExact(client) && PyTuple_GET_SIZE(client) == 2)) goto done;
    GET(A_NOTED, request);
    PyObject *noted = got[A_NOTED];
    if (!PyList_CheckExact(noted) || PyList_GET_SIZE(noted) != NOTED_COUNT) goto done;
    GET(A_METHOD, request);
    GET(A_PATH, request);
    GET(A_QUERY, request);
    GET(A_VERSION, request);
    GET(A_SERVER, request);
    GET(A_LENGTH, request);
    GET(A_STATUS, response);
    GET(A_BODY, response);
    GET(A_CONTENT_TYPE, response);
    GET(A_HOST, exchange);
    GET(A_ZONE, exchange);
    GET(A_STARTED, exchange);
    GET(A_COUNTRY, exchange);
    GET(A_ASN, exchange);
    GET(A_ORIGIN_STATUS, exchange);
    GET(A_ORIGIN_MS, exchange);
    GET(A_CACHE, exchange);
    GET(A_NETWORK, exchange);
    GET(A_RPC_METHOD, exchange);
    GET(A_RPC_REQUESTS, exchange);
    GET(A_RPC_ERROR_CODE, exchange);
    GET(A_UPSTREAM, exchange);
    if (got[A_ZONE] != Py_None) GET(A_ZONE_NAME, got[A_ZONE]);

    shape[0] = client == Py_None ? empty_text : PyTuple_GET_ITEM(client, 0);
    shape[1] = got[A_HOST];
    shape[2] = got[A_METHOD];
    shape[3] = got[A_PATH];
    shape[4] = got[A_QUERY];
    shape[5] = got[A_VERSION];
    shape[6] = PyList_GET_ITEM(noted, self->user_agent);
    shape[7] = PyList_GET_ITEM(noted, self->referer);
    shape[8] = PyList_GET_ITEM(noted, self->requested_with);
    shape[9] = got[A_CONTENT_TYPE];
    shape[10] = got[A_SERVER];
    shape[11] = got[A_COUNTRY];
    shape[12] = got[A_ASN];
    shape[13] = got[A_ZONE] == Py_None ? empty_text : got[A_ZONE_NAME];
    shape[14] = got[A_CACHE];
    shape[15] = got[A_NETWORK];
    shape[16] = got[A_RPC_METHOD];
    shape[17] = got[A_RPC_REQUESTS];
    shape[18] = got[A_RPC_ERROR_CODE];
    shape[19] = got[A_UPSTREAM];

    if (client == Py_None)
        frame.numbers[0] = 0;
    else
        NUMBER(0, PyTuple_GET_ITEM(client, 1));
    NUMBER(1, got[A_LENGTH]);
    NUMBER(2, got[A_STATUS]);
    if (!PyBytes_CheckExact(got[A_BODY])) goto done;
    frame.numbers[3] = (int64_t)PyBytes_GET_SIZE(got[A_BODY]);
    frame.numbers[4] = sent_bytes;
    NUMBER(5, got[A_STARTED]);
    frame.numbers[6] = written_ns;
    if (got[A_ORIGIN_STATUS] == Py_None)
        frame.numbers[7] = -1;
    else
        NUMBER(7, got[A_ORIGIN_STATUS]);
    if (got[A_ORIGIN_MS] == Py_None)
        frame.numbers[8] = -1;
    else
        NUMBER(8, got[A_ORIGIN_MS]);

    outcome = shape_number(self, shape, &frame.shape);
    if (outcome) goto done;

    frame.length = ROW_PAYLOAD_SIZE;
    frame.kind = ROW_KIND;
    memcpy(frame.ray, ray, RAY_BYTES);
    char *place = (char *)self->view.buf + self->end;
    memcpy(place, &frame, offsetof(RowFrame, commit));
    /* The commit word last: a kill between the two stores leaves a frame the reader drops (its answer was not
       sent). The barrier keeps the compiler from moving the stores. */
    __asm__ __volatile__("" ::: "memory");
    uint32_t commit = COMMIT_MARK;
    memcpy(place + offsetof(RowFrame, commit), &commit, sizeof commit);
    self->end += ROW_FRAME_SIZE;

done:
    for (int index = 0; index < A_COUNT; index++) Py_XDECREF(got[index]);
    return outcome;
#undef GET
#undef NUMBER
}

static int64_t now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* commit(request, response, sent_bytes, written_ns=0): the row of an answer about to be written, into the period;
   whatever this does not write goes to ``slow`` with the same arguments (``written_ns`` filled in). */
static PyObject *writer_commit(RowWriter *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t sent_bytes, written_ns = 0;
    int status;
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "commit(request, response, sent_bytes, written_ns=0)");
        return NULL;
    }
    status = number_of(args[2], &sent_bytes);
    if (status == 0 && nargs == 4) status = number_of(args[3], &written_ns);
    if (status < 0) return NULL;
    if (status == 0) {
        if (written_ns == 0) written_ns = now_ns();
        status = write_row(self, args[0], args[1], sent_bytes, written_ns);
        if (status < 0) return NULL;
        if (status == 0) Py_RETURN_NONE;
    }
    PyObject *written = written_ns ? PyLong_FromLongLong(written_ns) : NULL;
    if (written_ns && written == NULL) return NULL;
    PyObject *call_args[4] = {args[0], args[1], args[2], written ? written : (nargs == 4 ? args[3] : NULL)};
    Py_ssize_t count = call_args[3] ? 4 : 3;
    PyObject *result = PyObject_Vectorcall(self->slow, call_args, count, NULL);
    Py_XDECREF(written);
    return result;
}

static PyObject *writer_get_end(RowWriter *self, void *Py_UNUSED(closure)) { return PyLong_FromSsize_t(self->end); }

static int writer_set_end(RowWriter *self, PyObject *value, void *Py_UNUSED(closure)) {
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "end cannot be deleted");
        return -1;
    }
    Py_ssize_t end = PyLong_AsSsize_t(value);
    if (end == -1 && PyErr_Occurred()) return -1;
    if (!self->attached || end < 0 || end > self->view.len) {
        PyErr_SetString(PyExc_ValueError, "end must lie within the attached period");
        return -1;
    }
    self->end = end;
    return 0;
}

static PyObject *writer_get_attached(RowWriter *self, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(self->attached);
}

static PyMethodDef writer_methods[] = {
    {"commit", (PyCFunction)(void (*)(void))writer_commit, METH_FASTCALL,
     "commit(request, response, sent_bytes, written_ns=0): journals an answer's row, or hands it to slow."},
    {"attach", (PyCFunction)(void (*)(void))writer_attach, METH_FASTCALL,
     "attach(mapping, shapes, end, limit): the open period to write rows into, from end, while a row fits before limit."},
    {"detach", (PyCFunction)writer_detach, METH_NOARGS, "detach(): releases the period's mapping."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"end", (getter)writer_get_end, (setter)writer_set_end, "where the attached period's next frame goes", NULL},
    {"attached", (getter)writer_get_attached, NULL, "whether a period is attached", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot writer_slots[] = {
    {Py_tp_doc, "Writes the rows of ordinary answers into the open journal period (see the module)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, writer_init},
    {Py_tp_dealloc, writer_dealloc},
    {Py_tp_traverse, writer_traverse},
    {Py_tp_clear, writer_clear},
    {Py_tp_methods, writer_methods},
    {Py_tp_getset, writer_getset},
    {0, NULL},
};

static PyType_Spec writer_spec = {
    .name = "edgeplane.edge.row_writer.RowWriter",
    .basicsize = sizeof(RowWriter),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = writer_slots,
};

static int module_exec(PyObject *module) {
    for (int index = 0; index < A_COUNT; index++) {
        if (names[index] == NULL && (names[index] = PyUnicode_InternFromString(attribute_names[index])) == NULL)
            return -1;
    }
    if (empty_text == NULL && (empty_text = PyUnicode_FromString("")) == NULL) return -1;
    PyObject *type = PyType_FromModuleAndSpec(module, &writer_spec, NULL);
    if (type == NULL) return -1;
    if (PyModule_AddObject(module, "RowWriter", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    if (PyModule_AddIntConstant(module, "ROW_FRAME_SIZE", ROW_FRAME_SIZE) < 0) return -1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef row_writer_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "edgeplane.edge.row_writer",
    .m_doc = "The request log's commit of an ordinary answer, in C (see the opening comment of row_writer.c).",
    .m_size = 0,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit_row_writer(void) { return PyModuleDef_Init(&row_writer_module); }
