"""Keeps the receiver's tables in the `delivery` database and everything else in `default`.

The two databases have independent commit boundaries on purpose: the receiver is
another application that happens to ship in this repository.
"""

DELIVERY_APPS = frozenset({"delivery"})


class DeliveryRouter:
    def _alias_for(self, app_label: str) -> str:
        return "delivery" if app_label in DELIVERY_APPS else "default"

    def db_for_read(self, model, **hints):
        return self._alias_for(model._meta.app_label)

    def db_for_write(self, model, **hints):
        return self._alias_for(model._meta.app_label)

    def allow_relation(self, obj1, obj2, **hints):
        return self._alias_for(obj1._meta.app_label) == self._alias_for(obj2._meta.app_label)

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db == self._alias_for(app_label)
