"""A hand-built store for unit tests of the store desk's policy, backend and grading: one account, a few
orders with known amounts (so every expected cent is written out in the tests)."""

from __future__ import annotations

from service.env.store.world import (
    Account,
    Address,
    Line,
    Order,
    Payment,
    Request,
    Shipment,
    StoreDB,
    StoreHidden,
    StoreTicket,
    TrackingEvent,
    Variant,
    Writer,
)

TODAY = "2026-06-30"
HOME = Address(address_id="ADR-1", label="home", line1="12 Mill Lane", city="Leeds", postal_code="LS2 7EW")


def account(**changes: object) -> Account:
    base = Account(
        customer_id="CUS-TEST01",
        name="Ava Smith",
        email="ava.smith@mailbox.example",
        phone="07123 456789",
        tier="standard",
        member_since="2024-01-01",
        addresses=(HOME,),
        store_credit=0,
        returns_12m=0,
        chargebacks=0,
        fraud_flag=False,
    )
    return base.model_copy(update=changes)


def line(
    no: int,
    price: int,
    qty: int = 1,
    *,
    status: str = "delivered",
    category: str = "home",
    name: str | None = None,
    shipment: str | None = "SHP-1",
    **flags: object,
) -> Line:
    return Line(
        line_no=no,
        sku=f"SKU-{no}",
        product_id=f"PRD-{no}",
        name=name or f"Thing {no}",
        category=category,
        options="",
        unit_price=price,
        quantity=qty,
        status=status,  # type: ignore[arg-type]
        shipment_id=shipment if status != "processing" else None,
        **flags,
    )  # type: ignore[arg-type]


def shipment(
    delivered: str | None = "2026-06-20",
    estimated: str = "2026-06-20",
    sid: str = "SHP-1",
    lines: tuple[int, ...] = (1, 2, 3),
    status: str = "delivered",
) -> Shipment:
    events = [TrackingEvent(date="2026-06-15", status="picked_up", detail="Collected")]
    if delivered:
        events.append(TrackingEvent(date=delivered, status="delivered", detail="Delivered"))
    else:
        events.append(TrackingEvent(date="2026-06-18", status=status, detail=status))  # type: ignore[arg-type]
    return Shipment(
        shipment_id=sid,
        carrier="DPD",
        tracking_no="TRK1",
        line_nos=lines,
        shipped_on="2026-06-15",
        estimated_delivery=estimated,
        events=tuple(events),
    )


def order(
    lines: tuple[Line, ...],
    *,
    discount: int = 0,
    fee: int = 495,
    payments: tuple[Payment, ...] | None = None,
    shipments: tuple[Shipment, ...] | None = None,
    order_id: str = "ORD-10001",
) -> Order:
    total = sum(ln.subtotal for ln in lines) - discount + fee
    payments = payments or (
        Payment(payment_id="pay_card", method="card", label="Visa ending 4242", amount=total, captured_on="2026-06-10"),
    )
    return Order(
        order_id=order_id,
        placed_on="2026-06-10",
        lines=lines,
        promo_code="SAVE" if discount else None,
        discount=discount,
        shipping_fee=fee,
        shipping_address_id="ADR-1",
        payments=payments,
        shipments=shipments if shipments is not None else (shipment(lines=tuple(ln.line_no for ln in lines)),),
    )


def db(*orders: Order, acct: Account | None = None, stock: int = 5) -> StoreDB:
    catalog = tuple(
        Variant(
            sku=ln.sku,
            product_id=ln.product_id,
            name=ln.name,
            category=ln.category,
            options=ln.options,
            price=ln.unit_price,
            stock=stock,
            warranty_days=ln.warranty_days,
        )
        for o in orders
        for ln in o.lines
    )
    return StoreDB(today=TODAY, account=acct or account(), orders=orders, catalog=catalog)


def ticket(
    store: StoreDB,
    *requests: Request,
    writer: Writer | None = None,
    photos: bool = True,
    hidden: StoreHidden | None = None,
    condition: str | None = "unopened",
) -> StoreTicket:
    return StoreTicket(
        ticket_id="st_test",
        position=0,
        split="train",
        difficulty="medium",
        db=store,
        writer=writer or Writer(name="Ava", holder=True, gave_identity=True),
        requests=requests,
        hidden=hidden or StoreHidden(),
        photos_attached=photos,
        stated_condition=condition,  # type: ignore[arg-type]
        subject="Help",
        message="Hello",
        recipe="test",
    )
