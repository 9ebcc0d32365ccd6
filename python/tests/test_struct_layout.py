"""The ctypes mirrors and prototypes against the C headers.  Never skipped: a mismatch here
means every call through that struct or function is wrong.

The layout comes from tests/python/struct_layout.c (sizeof, and offsetof and size of every
field of every public struct), built by meson (CKJIT_STRUCT_LAYOUT) or, when the tests run
outside meson, compiled here with the C compiler.  The headers' own text gives the list
of structs, their field names and every CKJIT_API prototype.
"""
import ctypes
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO

from ckjit import _lib, _structs as S

INCLUDE = os.path.join(REPO, 'include')
HEADERS = [os.path.join(INCLUDE, 'ckjit', h)
           for h in ('ckjit.h', 'gemm.h', 'attention.h', 'paged_attention.h', 'prepared.h',
                     'gemm_fp8.h', 'moe.h')]


def _header_text():
    text = ''
    for path in HEADERS:
        with open(path) as f:
            text += f.read() + '\n'
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    return re.sub(r'//[^\n]*', ' ', text)


@pytest.fixture(scope='module')
def c_layout(tmp_path_factory):
    program = os.environ.get('CKJIT_STRUCT_LAYOUT')
    if not program:
        cc = shutil.which(os.environ.get('CC', 'cc')) or shutil.which('gcc')
        assert cc, 'no CKJIT_STRUCT_LAYOUT and no C compiler to build struct_layout.c'
        program = str(tmp_path_factory.mktemp('layout') / 'struct_layout')
        subprocess.run([cc, '-std=c11', '-I', INCLUDE,
                        os.path.join(REPO, 'tests', 'python', 'struct_layout.c'), '-o', program],
                       check=True)
    out = subprocess.run([program], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def header_structs():
    """{C struct name: [field names]} parsed from the headers' typedefs."""
    out = {}
    for name, body in re.findall(r'typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;',
                                 _header_text(), flags=re.S):
        fields = []
        for decl in body.split(';'):
            decl = decl.strip()
            if not decl:
                continue
            for part in decl.split(','):
                part = re.sub(r'\[[^\]]*\]', '', part).strip()
                fields.append(re.findall(r'\w+', part)[-1])
        out[name] = fields
    return out


def test_every_header_struct_is_in_the_c_program_and_mirrored(c_layout):
    in_headers = set(header_structs())
    assert in_headers, 'no typedef struct found in the headers'
    assert in_headers - set(c_layout) == set(), \
        'structs of the headers missing from tests/python/struct_layout.c'
    assert set(c_layout) - in_headers == set(), 'struct_layout.c lists structs the headers lack'
    assert in_headers - set(S.STRUCTS) == set(), \
        'structs of the headers without a ctypes mirror in ckjit/_structs.py'
    assert set(S.STRUCTS) - in_headers == set(), '_structs.STRUCTS names unknown structs'


def test_c_program_lists_every_field_of_the_headers(c_layout):
    for name, fields in header_structs().items():
        assert list(c_layout[name]['fields']) == fields, \
            f'{name}: struct_layout.c fields differ from the header'


@pytest.mark.parametrize('cname', sorted(S.STRUCTS))
def test_ctypes_sizes_and_offsets_match_c(c_layout, cname):
    mirror = S.STRUCTS[cname]
    want = c_layout[cname]
    ours = [f[0] for f in mirror._fields_]
    assert ours == list(want['fields']), f'{cname}: field names/order differ from C'
    bad = [f'{f}: ctypes offset {getattr(mirror, f).offset} size {getattr(mirror, f).size}, '
           f'C {off} {size}' for f, (off, size) in want['fields'].items()
           if (getattr(mirror, f).offset, getattr(mirror, f).size) != (off, size)]
    assert not bad, f'{cname} fields: ' + '; '.join(bad)
    assert ctypes.sizeof(mirror) == want['sizeof'], f'{cname} sizeof'


# Every packer the ops use (module, attribute) and the field run it covers.
PACKERS = [
    (S.NormParams, 'eps', 'rstd_out'),
    (S.TensorLayout, 'rank', 'strides[3]'),
    (S.GemmDesc, 'm', 'ldd'),
    (S.GemmDesc, 'c', 'allow_tf32'),
    (S.GemmDesc, 'm', 'allow_tf32'),
    (S.GemmFp8Desc, 'm', 'activation'),
    (S.AttentionDesc, 'dtype', 'softcap'),
    (S.PagedAttentionDesc, 'dtype', 'softcap'),
    (S.PagedKVAppendDesc, 'dtype', 'kv.scale_stride'),
    (S.PagedKV, 'num_pages', 'scale_stride'),
]


def _read(inst, dotted):
    name, _, index = dotted.partition('[')
    obj = inst
    for part in name.split('.'):
        obj = getattr(obj, part)
    return obj[int(index[:-1])] if index else obj


@pytest.mark.parametrize('cls,first,last', PACKERS,
                         ids=[f'{c.__name__}:{a}..{b}' for c, a, b in PACKERS])
def test_packers_write_the_fields_they_name(cls, first, last):
    packer, offset, names = S.packer(cls, first, last)
    inst = cls()
    # distinct values: floats where the field is a float (ctypes reads 0.0 back there)
    values = [i + 0.5 if isinstance(_read(inst, name), float) else i + 3
              for i, name in enumerate(names)]
    packer.pack_into(inst, offset, *values)
    for name, value in zip(names, values):
        assert _read(inst, name) == value, f'{cls.__name__}.{name}'


def _c_types(decl):
    """Parameter list text -> [type text] (names dropped)."""
    decl = decl.strip()
    if decl == 'void':
        return []
    out = []
    for part in decl.split(','):
        part = part.strip()
        m = re.match(r'(.*?)(\w+)$', part)
        typ = m.group(1).strip() if m and m.group(1).strip() else part
        out.append(typ.replace(' *', '*').replace('* ', '*').replace('const ', ''))
    return out


def _compatible(c_type, ctype):
    """Whether ctypes type `ctype` passes C type text `c_type` the same way."""
    c_type = c_type.strip()
    if c_type.endswith('*'):
        if ctype in (S.PTR, S.CSTR):
            return True
        if hasattr(ctype, '_type_') and issubclass(ctype, ctypes._Pointer):
            target = ctype._type_
            base = c_type[:-1].strip()
            if base in S.STRUCTS:
                return S.STRUCTS[base] is target
            return {'void*': S.PTR, 'int': S.I32}.get(base) is target
        return False
    scalars = {'int64_t': S.I64, 'int': S.I32, 'unsigned': S.U32, 'size_t': S.SIZE,
               'float': S.F32, 'double': S.F64, 'void': None}
    if c_type in scalars:
        return scalars[c_type] is ctype
    if c_type in S.STRUCTS:  # returned by value
        return S.STRUCTS[c_type] is ctype
    if c_type.startswith('ckjit_'):  # an enum
        return ctype is S.ENUM
    return False


def header_prototypes():
    """{function: (return type text, [parameter type texts])} of every CKJIT_API."""
    out = {}
    for ret, name, params in re.findall(r'CKJIT_API\s+([\w\s\*]+?)\s*\**\s*(ckjit_\w+)\s*'
                                        r'\(([^)]*)\)\s*;', _header_text()):
        star = re.search(rf'{re.escape(ret)}\s*(\**)\s*{name}', _header_text()).group(1)
        out[name] = ((ret.replace('const ', '') + star).strip(), _c_types(params))
    return out


def test_every_header_function_has_a_prototype():
    protos = header_prototypes()
    assert len(protos) > 40, 'the prototype parser found too few functions'
    missing = sorted(set(protos) - set(_lib.PROTOTYPES))
    assert not missing, f'functions of the headers not bound in ckjit/_lib.py: {missing}'
    stale = sorted(n for n in set(_lib.PROTOTYPES) - set(protos) if n not in _lib.OPTIONAL)
    assert not stale, f'_lib.PROTOTYPES names functions the headers do not declare: {stale}'


@pytest.mark.parametrize('name', sorted(_lib.PROTOTYPES))
def test_prototype_matches_header(name):
    protos = header_prototypes()
    if name not in protos:
        assert name in _lib.OPTIONAL
        return
    ret, params = protos[name]
    restype, argtypes = _lib.PROTOTYPES[name]
    assert len(argtypes) == len(params), f'{name}: {len(argtypes)} argtypes, C has {params}'
    ret_ok = _compatible(ret, restype) or (ret == 'char*' and restype is S.CSTR)
    assert ret_ok, f'{name}: restype {restype} for C {ret}'
    for i, (c_type, ctype) in enumerate(zip(params, argtypes)):
        assert _compatible(c_type, ctype), f'{name} argument {i}: {ctype} for C {c_type}'


def test_loaded_library_has_every_required_function():
    missing = [n for n in _lib.PROTOTYPES if n not in _lib.OPTIONAL and not hasattr(_lib.lib, n)]
    assert not missing
    fn = _lib.lib.ckjit_softmax
    assert fn.argtypes == _lib.PROTOTYPES['ckjit_softmax'][1]  # bound once, at import


def test_enum_values_match_the_c_library():
    names = [_lib.lib.ckjit_dtype_name(i).decode() for i in range(len(S.DTYPE_NAMES))]
    assert names == list(S.DTYPE_NAMES)
    for value, name in ((S.ERROR_INVALID_ARGUMENT, 'CKJIT_ERROR_INVALID_ARGUMENT'),
                        (S.ERROR_UNSUPPORTED, 'CKJIT_ERROR_UNSUPPORTED'),
                        (S.ERROR_INTERNAL, 'CKJIT_ERROR_INTERNAL')):
        assert _lib.lib.ckjit_status_string(value).decode() == name
    text = _header_text()
    for table, prefix in ((S.UNARY_OPS, 'CKJIT_UNARY_'), (S.BINARY_OPS, 'CKJIT_BINARY_'),
                          (S.REDUCE_OPS, 'CKJIT_REDUCE_'), (S.FP8_SCALINGS, 'CKJIT_FP8_SCALE_')):
        for name, value in table.items():
            m = re.search(rf'{prefix}{name.upper()}\s*=\s*(\d+)', text)
            assert m and int(m.group(1)) == value, f'{prefix}{name.upper()}'
