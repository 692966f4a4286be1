// tracetorch_native_checks: the per-call checks of a compiled call, many objects in one call
// (compiler/native_checks.py).
//
// A compiled call checks that the tensors it reads (a module's parameters and buffers, an
// optimizer's state) still have the dtype, device, sizes, strides and requires_grad it was
// compiled for. In Python that is ~0.7 us per tensor (each property read builds an object);
// ResNet-50's 267 static tensors cost ~200 us per call. Here it is a loop over TensorImpls.
// Its guards also check that the module attributes they resolved once are still the same
// objects (frontend/mutation.py): ResNet-50 reads ~1500 dict entries per call.
//
// record(tensors) -> bytes: the metadata of a sequence of tensors, as int64s per tensor:
//     scalar type, device type, device index, requires_grad, ndim, sizes..., strides...
// check(tensors, record) -> bool: do the tensors have exactly that metadata? False for
//     anything else (another count, a non-tensor, a tensor without strides).
#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>

#include <vector>

static bool append_record(PyObject* o, std::vector<int64_t>& out) {
  if (!THPVariable_Check(o)) return false;
  const at::Tensor& t = THPVariable_Unpack(o);
  if (t.layout() != c10::kStrided) return false;
  auto d = t.device();
  out.push_back(static_cast<int64_t>(t.scalar_type()));
  out.push_back(static_cast<int64_t>(d.type()));
  out.push_back(static_cast<int64_t>(d.index()));
  out.push_back(t.requires_grad() ? 1 : 0);
  auto sizes = t.sizes();
  auto strides = t.strides();
  out.push_back(static_cast<int64_t>(sizes.size()));
  out.insert(out.end(), sizes.begin(), sizes.end());
  out.insert(out.end(), strides.begin(), strides.end());
  return true;
}

static PyObject* record(PyObject*, PyObject* arg) {
  PyObject* seq = PySequence_Fast(arg, "record() takes a sequence of tensors");
  if (seq == nullptr) return nullptr;
  std::vector<int64_t> out;
  bool ok = true;
  try {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject** items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n && ok; i++) ok = append_record(items[i], out);
  } catch (...) {
    ok = false;
  }
  Py_DECREF(seq);
  if (!ok) Py_RETURN_NONE;   // not recordable: the caller keeps its Python check
  return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(out.data()),
                                   static_cast<Py_ssize_t>(out.size() * sizeof(int64_t)));
}

static bool matches(PyObject* o, const int64_t*& e, const int64_t* end) {
  if (!THPVariable_Check(o) || end - e < 5) return false;
  const at::Tensor& t = THPVariable_Unpack(o);
  if (t.layout() != c10::kStrided) return false;
  auto d = t.device();
  if (static_cast<int64_t>(t.scalar_type()) != e[0] || static_cast<int64_t>(d.type()) != e[1] ||
      static_cast<int64_t>(d.index()) != e[2] || (t.requires_grad() ? 1 : 0) != e[3])
    return false;
  int64_t nd = e[4];
  e += 5;
  auto sizes = t.sizes();
  if (static_cast<int64_t>(sizes.size()) != nd || end - e < 2 * nd) return false;
  auto strides = t.strides();
  for (int64_t k = 0; k < nd; k++)
    if (sizes[k] != e[k] || strides[k] != e[nd + k]) return false;
  e += 2 * nd;
  return true;
}

static PyObject* check(PyObject*, PyObject* args) {
  PyObject* arg;
  Py_buffer buf;
  if (!PyArg_ParseTuple(args, "Oy*", &arg, &buf)) return nullptr;
  PyObject* seq = PySequence_Fast(arg, "check() takes a sequence of tensors");
  if (seq == nullptr) {
    PyBuffer_Release(&buf);
    return nullptr;
  }
  const int64_t* e = static_cast<const int64_t*>(buf.buf);
  const int64_t* end = e + buf.len / static_cast<Py_ssize_t>(sizeof(int64_t));
  bool ok = true;
  try {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject** items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n && ok; i++) ok = matches(items[i], e, end);
    ok = ok && e == end;
  } catch (...) {
    ok = false;
  }
  Py_DECREF(seq);
  PyBuffer_Release(&buf);
  if (ok) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

// items_are(dicts, keys, expected) -> bool: dicts[i][keys[i]] is expected[i] for every i (three
//     tuples of one length; the dicts are exact dicts or OrderedDicts, read without __getitem__).
static PyObject* items_are(PyObject*, PyObject* args) {
  PyObject *dicts, *keys, *expected;
  if (!PyArg_ParseTuple(args, "O!O!O!", &PyTuple_Type, &dicts, &PyTuple_Type, &keys, &PyTuple_Type, &expected))
    return nullptr;
  Py_ssize_t n = PyTuple_GET_SIZE(dicts);
  if (PyTuple_GET_SIZE(keys) != n || PyTuple_GET_SIZE(expected) != n) Py_RETURN_FALSE;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* d = PyTuple_GET_ITEM(dicts, i);
    if (!PyDict_Check(d)) Py_RETURN_FALSE;
    PyObject* v = PyDict_GetItemWithError(d, PyTuple_GET_ITEM(keys, i));   // borrowed
    if (v == nullptr) {
      PyErr_Clear();
      Py_RETURN_FALSE;
    }
    if (v != PyTuple_GET_ITEM(expected, i)) Py_RETURN_FALSE;
  }
  Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"items_are", items_are, METH_VARARGS, "items_are(dicts, keys, expected) -> bool"},
    {"record", record, METH_O, "record(tensors) -> bytes or None"},
    {"check", check, METH_VARARGS, "check(tensors, record) -> bool"},
    {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tracetorch_native_checks", nullptr, -1, methods};

PyMODINIT_FUNC PyInit_tracetorch_native_checks(void) { return PyModule_Create(&module); }
