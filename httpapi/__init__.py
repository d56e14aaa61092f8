"""Reading signed JSON requests safely: body limits, strict JSON and signatures with rotating secrets.

A plain library: it imports nothing from the product's apps, so the receiver (`delivery`), which must
stay independent of them, and the intake API can share it.
"""
