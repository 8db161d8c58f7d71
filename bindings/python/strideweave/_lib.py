"""The C library, through the private SWIG layer strideweave._native, with
the package's exception classes registered first. Every module calls the
library as `native` from here, so an error raised by any call arrives as
its strideweave class, whatever was imported before."""
from . import _native as native
from ._errors import CLASSES_BY_CODE

native.set_error_classes(CLASSES_BY_CODE)
