/* edgeplane.edge.row_builder: the request log's rows of ordinary answers, built in C.

   What it does: the loop of ``RequestRows.add_answers`` (``request_rows.py``) for the common answer, an allowed request
   whose values all have their usual types: the row's shape (the 15 texts of ``SHAPE``) numbered through the period's
   dictionary of shapes (its number appended to a byte array as a native 32-bit integer), its nine numbers packed
   as native 64-bit integers onto the period's byte array, its ray id and a newline appended to a third byte array
   (no Python object is kept per row). Every other answer (not started, not logged, a firewall match, a number beyond
   64 bits, an unusual ray id, a value of an unexpected type) is handed back, in order, for the Python loop, which
   handles every case and stays the reference:
   ``tests/edge/test_row_builder.py`` holds the two to the same chunks. A row whose shape equals the previous row's
   reuses its number without building a tuple or looking it up (``last``).

   Why by hand, in C: the loop was most of the edge's cost of logging, and in the interpreter it took about 7,100
   instructions a row (15 attribute loads to build a tuple, the tuple's hash and comparison, nine numbers converted
   by ``struct``); here it takes about 850, and paired at concurrency 16 the edge spends 1.2 µs less CPU a request
   (of some 38).
   No library maps an application's own objects onto packed rows; ``struct``, ``array`` and ``operator`` each do a
   piece per call, and a call per value is what costs. Measured in ``docs/benchmarks.md`` (log pipeline).

   How it reads the objects: ``setup`` is given the classes (``EdgeRequest``, ``EdgeResponse``, ``Exchange``,
   ``ZoneRoute``, all with ``__slots__``) and finds each attribute's slot offset from its member descriptor; a row
   then reads the slots directly, after checking each object's exact class, so an object of any other class (a
   subclass, a test double) goes to the Python loop. Every value read is borrowed from objects the caller holds; the
   only references this module makes are those it stores (shape tuples and their numbers) and ``last``'s. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define SHAPE_SIZE 15
#define NUMBER_COUNT 9
/* The longest ray id journalled here (the edge's are 16 hex digits); a longer one goes to the Python loop. */
#define MAX_RAY 64
/* ``NOTED_HEADERS`` indices (``http_server.py``), checked by ``setup``. */
#define NOTED_COUNT 8

typedef struct {
    PyTypeObject *request_type, *response_type, *exchange_type, *zone_type;
    PyObject *allowed; /* ``ALLOWED``: the verdict of a request no rule matched */
    Py_ssize_t user_agent, referer, requested_with;
    Py_ssize_t rq_context, rq_client, rq_noted, rq_method, rq_path, rq_query, rq_version, rq_server, rq_length;
    Py_ssize_t rs_status, rs_body, rs_content_type;
    Py_ssize_t ex_host, ex_zone, ex_ray, ex_started, ex_country, ex_asn, ex_verdict, ex_origin_status, ex_origin_ms,
        ex_cache;
    Py_ssize_t zone_name;
} Layout;

static Layout layout;
static int layout_ready = 0;

#define SLOT(object, offset) (*(PyObject **)((char *)(object) + (offset)))

static int slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset) {
    PyObject *descriptor = PyObject_GetAttrString((PyObject *)type, name);
    if (descriptor == NULL) return -1;
    int ok = Py_IS_TYPE(descriptor, &PyMemberDescr_Type) &&
             ((PyMemberDescrObject *)descriptor)->d_member->type == T_OBJECT_EX;
    if (ok) *offset = ((PyMemberDescrObject *)descriptor)->d_member->offset;
    Py_DECREF(descriptor);
    if (!ok) PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", type->tp_name, name);
    return ok ? 0 : -1;
}

static PyObject *setup(PyObject *module, PyObject *args) {
    PyTypeObject *request, *response, *exchange, *zone;
    PyObject *allowed;
    Py_ssize_t noted_count;
    Layout found;
    if (!PyArg_ParseTuple(args, "O!O!O!O!Onnnn", &PyType_Type, &request, &PyType_Type, &response, &PyType_Type,
                          &exchange, &PyType_Type, &zone, &allowed, &noted_count, &found.user_agent, &found.referer,
                          &found.requested_with))
        return NULL;
    if (noted_count != NOTED_COUNT || found.user_agent < 0 || found.user_agent >= NOTED_COUNT || found.referer < 0 ||
        found.referer >= NOTED_COUNT || found.requested_with < 0 || found.requested_with >= NOTED_COUNT) {
        PyErr_SetString(PyExc_ValueError, "the noted headers are not those this module was written for");
        return NULL;
    }
    if (slot_offset(request, "context", &found.rq_context) || slot_offset(request, "client", &found.rq_client) ||
        slot_offset(request, "noted", &found.rq_noted) || slot_offset(request, "method", &found.rq_method) ||
        slot_offset(request, "path", &found.rq_path) || slot_offset(request, "query_string", &found.rq_query) ||
        slot_offset(request, "http_version", &found.rq_version) || slot_offset(request, "server", &found.rq_server) ||
        slot_offset(request, "content_length", &found.rq_length) ||
        slot_offset(response, "status", &found.rs_status) || slot_offset(response, "body", &found.rs_body) ||
        slot_offset(response, "content_type", &found.rs_content_type) ||
        slot_offset(exchange, "host", &found.ex_host) || slot_offset(exchange, "zone", &found.ex_zone) ||
        slot_offset(exchange, "ray_id", &found.ex_ray) || slot_offset(exchange, "started_ns", &found.ex_started) ||
        slot_offset(exchange, "country", &found.ex_country) || slot_offset(exchange, "asn", &found.ex_asn) ||
        slot_offset(exchange, "verdict", &found.ex_verdict) ||
        slot_offset(exchange, "origin_status", &found.ex_origin_status) ||
        slot_offset(exchange, "origin_duration_ms", &found.ex_origin_ms) ||
        slot_offset(exchange, "cache_status", &found.ex_cache) || slot_offset(zone, "zone_name", &found.zone_name))
        return NULL;
    if (layout_ready) {
        Py_DECREF(layout.request_type);
        Py_DECREF(layout.response_type);
        Py_DECREF(layout.exchange_type);
        Py_DECREF(layout.zone_type);
        Py_DECREF(layout.allowed);
    }
    Py_INCREF(request);
    Py_INCREF(response);
    Py_INCREF(exchange);
    Py_INCREF(zone);
    Py_INCREF(allowed);
    found.request_type = request;
    found.response_type = response;
    found.exchange_type = exchange;
    found.zone_type = zone;
    found.allowed = allowed;
    layout = found;
    layout_ready = 1;
    Py_RETURN_NONE;
}

/* An exact int within 64 bits; 0, or -1 for anything else (no exception set). */
static int as_int64(PyObject *value, long long *out) {
    if (!PyLong_CheckExact(value)) return -1;
    int overflow = 0;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) return -1;
    if (number == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    *out = number;
    return 0;
}

/* An origin value: None is -1 (missing), as ``add_answers`` packs it. */
static int as_origin_int64(PyObject *value, long long *out) {
    if (value == Py_None) {
        *out = -1;
        return 0;
    }
    return as_int64(value, out);
}

/* Appends ``length`` bytes to a byte array. ``PyByteArray_Resize`` alone grows the array by an eighth, copying it each
   time, and shrinks an allocation more than twice the size to the size (so growing by hand, then setting the size
   through it, would copy a small array at every append); this doubles the allocation when full and sets the size
   itself, as ``PyByteArray_Resize`` does within the allocation. */
static int append_bytes(PyObject *array, const void *data, Py_ssize_t length) {
    PyByteArrayObject *bytes = (PyByteArrayObject *)array;
    Py_ssize_t size = Py_SIZE(array), wanted = size + length;
    if (wanted + 1 > bytes->ob_alloc - (bytes->ob_start - bytes->ob_bytes) &&
        PyByteArray_Resize(array, wanted < 4096 ? 4096 : 2 * wanted))
        return -1;
    memcpy(PyByteArray_AS_STRING(array) + size, data, (size_t)length);
    Py_SET_SIZE(array, wanted);
    PyByteArray_AS_STRING(array)[wanted] = '\0'; /* the trailing null a byte array keeps */
    return 0;
}

/* Whether a ray id can be journalled as it is: ASCII, at most ``MAX_RAY`` characters, no newline (the separator). */
static int plain_ray(PyObject *ray) {
    return PyUnicode_IS_COMPACT_ASCII(ray) && PyUnicode_GET_LENGTH(ray) <= MAX_RAY &&
           memchr(PyUnicode_DATA(ray), '\n', (size_t)PyUnicode_GET_LENGTH(ray)) == NULL;
}

/* Appends a plain ray id and its separator to ``rays``. */
static int append_ray(PyObject *rays, PyObject *ray) {
    Py_ssize_t length = PyUnicode_GET_LENGTH(ray);
    char entry[MAX_RAY + 1];
    memcpy(entry, PyUnicode_DATA(ray), (size_t)length);
    entry[length] = '\n';
    return append_bytes(rays, entry, length + 1);
}

typedef struct {
    PyObject *shapes;        /* dict: shape -> its number */
    PyObject *shape_list;    /* list: the shapes, by number */
    PyObject *shape_numbers; /* bytearray: each row's shape number, a native 32-bit unsigned integer */
    PyObject *rays;          /* bytearray: each row's ray id, ASCII, and a newline */
    PyObject *numbers;       /* bytearray: each row's numbers */
    PyObject *last;          /* list: [the previous row's shape or None, its number] */
} Rows;

/* Whether a row's texts equal the previous row's shape. */
static int same_as_last(PyObject **texts, PyObject *last_shape) {
    if (!PyTuple_CheckExact(last_shape) || PyTuple_GET_SIZE(last_shape) != SHAPE_SIZE) return 0;
    for (int index = 0; index < SHAPE_SIZE; index++) {
        PyObject *value = texts[index], *before = PyTuple_GET_ITEM(last_shape, index);
        if (value == before) continue;
        if (Py_TYPE(value) != Py_TYPE(before)) return 0;
        int equal = PyObject_RichCompareBool(value, before, Py_EQ);
        if (equal <= 0) return equal; /* -1: an exception */
    }
    return 1;
}

/* The number of a row's shape (borrowed: the dictionary or ``last`` holds it); NULL with an exception set. */
static PyObject *shape_number(Rows *rows, PyObject **texts) {
    int same = same_as_last(texts, PyList_GET_ITEM(rows->last, 0));
    if (same < 0) return NULL;
    if (same) return PyList_GET_ITEM(rows->last, 1);
    PyObject *shape = PyTuple_New(SHAPE_SIZE);
    if (shape == NULL) return NULL;
    for (int index = 0; index < SHAPE_SIZE; index++) {
        Py_INCREF(texts[index]);
        PyTuple_SET_ITEM(shape, index, texts[index]);
    }
    PyObject *number = PyDict_GetItemWithError(rows->shapes, shape);
    if (number == NULL) {
        if (PyErr_Occurred()) goto failed;
        number = PyLong_FromSsize_t(PyList_GET_SIZE(rows->shape_list));
        if (number == NULL) goto failed;
        if (PyDict_SetItem(rows->shapes, shape, number) || PyList_Append(rows->shape_list, shape)) {
            Py_DECREF(number);
            goto failed;
        }
        Py_DECREF(number); /* the dictionary holds it */
    }
    Py_INCREF(number);
    PyList_SetItem(rows->last, 1, number); /* steals the reference; the number before stays in the dictionary */
    PyList_SetItem(rows->last, 0, shape);  /* likewise */
    return number;
failed:
    Py_DECREF(shape);
    return NULL;
}

/* Adds an answer's row: 1 when added, 0 when it is not an ordinary answer (the Python loop takes it), -1 with an
   exception set. */
static int add_answer(Rows *rows, PyObject *answer, PyObject *empty) {
    const Layout *l = &layout;
    if (!PyTuple_CheckExact(answer) || PyTuple_GET_SIZE(answer) != 4) return 0;
    PyObject *request = PyTuple_GET_ITEM(answer, 0), *response = PyTuple_GET_ITEM(answer, 1);
    if (!Py_IS_TYPE(request, l->request_type) || !Py_IS_TYPE(response, l->response_type)) return 0;
    PyObject *exchange = SLOT(request, l->rq_context);
    if (exchange == NULL || !Py_IS_TYPE(exchange, l->exchange_type)) return 0;
    PyObject *ray = SLOT(exchange, l->ex_ray);
    if (ray == NULL || !PyUnicode_CheckExact(ray) || PyUnicode_GET_LENGTH(ray) == 0) return 0; /* not started */
    if (SLOT(exchange, l->ex_verdict) != l->allowed) return 0; /* a firewall verdict: the Python loop looks */
    PyObject *client = SLOT(request, l->rq_client), *noted = SLOT(request, l->rq_noted);
    PyObject *zone = SLOT(exchange, l->ex_zone), *body = SLOT(response, l->rs_body);
    if (client == NULL || noted == NULL || zone == NULL || body == NULL || !PyList_CheckExact(noted) ||
        PyList_GET_SIZE(noted) != NOTED_COUNT || !PyBytes_CheckExact(body))
        return 0;
    PyObject *client_ip = empty, *client_port = NULL, *zone_name = empty;
    if (client != Py_None) {
        if (!PyTuple_CheckExact(client) || PyTuple_GET_SIZE(client) != 2) return 0;
        client_ip = PyTuple_GET_ITEM(client, 0);
        client_port = PyTuple_GET_ITEM(client, 1);
    }
    if (zone != Py_None) {
        if (!Py_IS_TYPE(zone, l->zone_type)) return 0;
        zone_name = SLOT(zone, l->zone_name);
    }
    PyObject *texts[SHAPE_SIZE] = {
        client_ip,
        SLOT(exchange, l->ex_host),
        SLOT(request, l->rq_method),
        SLOT(request, l->rq_path),
        SLOT(request, l->rq_query),
        SLOT(request, l->rq_version),
        PyList_GET_ITEM(noted, l->user_agent),
        PyList_GET_ITEM(noted, l->referer),
        PyList_GET_ITEM(noted, l->requested_with),
        SLOT(response, l->rs_content_type),
        SLOT(request, l->rq_server),
        SLOT(exchange, l->ex_country),
        SLOT(exchange, l->ex_asn),
        zone_name,
        SLOT(exchange, l->ex_cache),
    };
    for (int index = 0; index < SHAPE_SIZE; index++)
        if (texts[index] == NULL) return 0; /* an attribute never set */
    PyObject *length = SLOT(request, l->rq_length), *status = SLOT(response, l->rs_status);
    PyObject *started = SLOT(exchange, l->ex_started), *origin_status = SLOT(exchange, l->ex_origin_status);
    PyObject *origin_ms = SLOT(exchange, l->ex_origin_ms);
    if (length == NULL || status == NULL || started == NULL || origin_status == NULL || origin_ms == NULL) return 0;
    /* The order of ``NUMBER_COLUMNS``. */
    long long row[NUMBER_COUNT];
    row[0] = 0;
    row[3] = PyBytes_GET_SIZE(body);
    if ((client_port != NULL && as_int64(client_port, &row[0])) || as_int64(length, &row[1]) ||
        as_int64(status, &row[2]) || as_int64(PyTuple_GET_ITEM(answer, 2), &row[4]) || as_int64(started, &row[5]) ||
        as_int64(PyTuple_GET_ITEM(answer, 3), &row[6]) || as_origin_int64(origin_status, &row[7]) ||
        as_origin_int64(origin_ms, &row[8]))
        return 0; /* not a 64-bit integer: the row is kept whole */
    if (!plain_ray(ray)) return 0; /* an unusual ray id: the Python loop takes the row */
    PyObject *number = shape_number(rows, texts);
    if (number == NULL) return -1;
    size_t index = PyLong_AsSize_t(number);
    if (index == (size_t)-1 && PyErr_Occurred()) return -1;
    if (index > 0xFFFFFFFFu) {
        PyErr_SetString(PyExc_OverflowError, "more shapes in a period than 32 bits number");
        return -1;
    }
    uint32_t shape_index = (uint32_t)index;
    if (append_bytes(rows->shape_numbers, &shape_index, sizeof shape_index) || append_ray(rows->rays, ray) ||
        append_bytes(rows->numbers, row, NUMBER_COUNT * sizeof(long long)))
        return -1;
    return 1;
}

static PyObject *add_answers(PyObject *module, PyObject *args) {
    PyObject *answers;
    Rows rows;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!", &PyList_Type, &answers, &PyDict_Type, &rows.shapes, &PyList_Type,
                          &rows.shape_list, &PyByteArray_Type, &rows.shape_numbers, &PyByteArray_Type, &rows.rays,
                          &PyByteArray_Type, &rows.numbers, &PyList_Type, &rows.last))
        return NULL;
    if (!layout_ready) {
        PyErr_SetString(PyExc_RuntimeError, "row_builder.setup has not been called");
        return NULL;
    }
    if (PyList_GET_SIZE(rows.last) != 2) {
        PyErr_SetString(PyExc_ValueError, "last must be [shape or None, number]");
        return NULL;
    }
    PyObject *empty = PyUnicode_New(0, 0);
    PyObject *rest = PyList_New(0);
    if (empty == NULL || rest == NULL) goto failed;
    for (Py_ssize_t index = 0; index < PyList_GET_SIZE(answers); index++) {
        PyObject *answer = PyList_GET_ITEM(answers, index);
        Py_INCREF(answer); /* the list may change under a comparison's Python code */
        int added = add_answer(&rows, answer, empty);
        if (added < 0 || (added == 0 && PyList_Append(rest, answer))) {
            Py_DECREF(answer);
            goto failed;
        }
        Py_DECREF(answer);
    }
    Py_DECREF(empty);
    return rest;
failed:
    Py_XDECREF(empty);
    Py_XDECREF(rest);
    return NULL;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(request_type, response_type, exchange_type, zone_type, allowed, noted_count, user_agent, referer, "
     "requested_with): the classes whose slots rows are read from"},
    {"add_answers", add_answers, METH_VARARGS,
     "add_answers(answers, shapes, shape_list, shape_numbers, rays, numbers, last) -> the answers not added "
     "(shape_numbers, rays and numbers are byte arrays)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT,
    "edgeplane.edge.row_builder",
    "The request log's rows of ordinary answers, built in C (see row_builder.c).",
    -1,
    methods,
};

PyMODINIT_FUNC PyInit_row_builder(void) { return PyModule_Create(&module_definition); }
